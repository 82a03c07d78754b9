"""Google's Gemini models on Vertex AI: the `vertex-gemini` kind (see vertex.py).

Callers speak Gemini's native API to the proxy (`/v1beta/models/{model}:generateContent`,
`:streamGenerateContent`), the `gemini` kind's wire; the proxy sends
`/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`
(`:streamGenerateContent?alt=sse`) with an ADC access token. Errors are Google's, as the
`gemini` kind reads them.
"""

from __future__ import annotations

from collections.abc import Mapping

from leasegate.providers.base import Endpoint, UpstreamRoute
from leasegate.providers.gemini import GENERATE, STREAM_GENERATE, X_GOOG_API_KEY, Gemini
from leasegate.providers.vertex import VertexAccount, model_prefix, vertex_route


class VertexGemini(VertexAccount):
    """Google's Gemini models on Vertex AI, with the `gemini` kind's wire."""

    name = "vertex-gemini"
    caller_key_headers = (X_GOOG_API_KEY,)  # its callers speak Gemini's wire
    endpoints = (GENERATE, STREAM_GENERATE)
    errors = Gemini.errors
    input_includes_cache = True

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def upstream_target(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str], stream: bool
    ) -> str:
        if endpoint is STREAM_GENERATE:
            return model_prefix(options, "google") + served_model + ":streamGenerateContent?alt=sse"
        return model_prefix(options, "google") + served_model + ":generateContent"

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        methods = {"generateContent": GENERATE, "streamGenerateContent": STREAM_GENERATE}
        return vertex_route(path, "google", methods)
