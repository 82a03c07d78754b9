"""What the demo upstream answers, per provider kind: the demo's registry of examples.

`EXAMPLES` has one `KindExamples` per kind of leasegate.providers (the completeness test,
tests/unit/providers/test_completeness.py, fails for a kind without one): a typical answer
on each of its endpoints, plain and streamed, a typical error payload (with the headers the
provider names its error in) and a typical in-stream error, each in the shape the kind's
upstream answers in, and which of its upstream paths ask for a stream by themselves. Most
kinds answer in their wire's own shape; a cloud frames its streams its own way (Bedrock's AWS
event stream) and names its errors its own way (AWS's `x-amzn-ErrorType`, Google's status).

Every answer names the placeholder `EXAMPLE_MODEL`; the demo upstream puts the request's
model in its place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from leasegate.demo import eventstream
from leasegate.providers import EXAMPLE_MODEL, Endpoint, Example, ProviderKind

__all__ = ["EXAMPLES", "EXAMPLE_MODEL", "Example", "KindExamples", "examples_of"]

_NO_HEADERS: Mapping[str, str] = {}


class KindExamples:
    """A kind whose upstream answers in its wires' own shapes, its streams as SSE."""

    stream_suffixes: tuple[str, ...] = ()
    """Ends of upstream paths that ask for a stream (besides the body's `stream: true`, or
    an endpoint that always streams)."""
    stream_content_type = "text/event-stream"

    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        """A typical answer with `n` content pieces: a body, or (streamed) its SSE events."""
        return endpoint.wire.example(endpoint, stream, n)

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        """A typical error answer for `status`: headers and payload."""
        return _NO_HEADERS, endpoint.wire.example_error_body(status)

    def error_event(self, endpoint: Endpoint) -> bytes:
        """A typical in-stream error of the upstream itself, framed as its stream is."""
        return endpoint.wire.example_error_event()

    def frame(self, sse: bytes) -> bytes:
        """SSE events of `answer` framed as this kind's upstream streams them."""
        return sse

    def streams(self, path: str) -> bool:
        return path.endswith(self.stream_suffixes) if self.stream_suffixes else False


_AWS_ERRORS = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}


class BedrockExamples(KindExamples):
    """Bedrock: AWS's error shape (`{"message"}`, the type in `x-amzn-ErrorType`) and its
    streams as an AWS event stream of Anthropic's events."""

    stream_suffixes = ("/invoke-with-response-stream",)
    stream_content_type = eventstream.CONTENT_TYPE

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        name = _AWS_ERRORS.get(status, "InternalServerException")
        headers = {
            "x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        }
        return headers, json.dumps({"message": f"mock status {status}"}).encode()

    def error_event(self, endpoint: Endpoint) -> bytes:
        return eventstream.exception("modelStreamErrorException", "The model stream failed.")

    def frame(self, sse: bytes) -> bytes:
        return eventstream.from_sse(sse)


class VertexExamples(KindExamples):
    """Claude on Vertex AI: Anthropic's answers and streams, Google's error shape."""

    stream_suffixes = (":streamRawPredict",)

    def __init__(self, google: Endpoint) -> None:
        self._google = google

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        return _NO_HEADERS, self._google.wire.example_error_body(status)


def _registry() -> dict[str, KindExamples]:
    from leasegate.providers.gemini import GENERATE

    sse = KindExamples()
    return {
        "openai": sse,
        "anthropic": sse,
        "openrouter": sse,
        "openai-compatible": sse,
        "azure-openai": sse,
        "gemini": sse,
        "bedrock": BedrockExamples(),
        "vertex": VertexExamples(GENERATE),
        "vertex-gemini": sse,
    }


EXAMPLES: Mapping[str, KindExamples] = _registry()
"""Every kind's examples, by kind name."""


def examples_of(kind: ProviderKind) -> KindExamples:
    """The kind's examples (KeyError for a kind the demo has none for)."""
    return EXAMPLES[kind.name]
