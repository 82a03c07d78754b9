"""Claude and Gemini on Google Vertex AI: the `vertex` kind (and what `vertex-gemini`,
vertex_gemini.py, shares with it).

Both name a Google Cloud `project` and a `location` (a region such as `europe-west1`, or
`global`; `base_url` is `https://{location}-aiplatform.googleapis.com`, or
`https://aiplatform.googleapis.com` for `global`), and authenticate with OAuth2 access tokens
from Application Default Credentials (leasegate.upstream.cloud_auth): no key variable.

`vertex` serves Anthropic's models: callers speak Anthropic Messages to the proxy
(`/v1/messages`) as for an `anthropic` account; the proxy sends
`/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict`
(`:streamRawPredict` for a stream) with `model` removed from the body and
`anthropic_version: vertex-2023-10-16` set; the answer and its SSE stream are Anthropic's.
Vertex's own errors (Google's `{"error": {"code", "status", "message"}}`) reach the caller in
Anthropic's shape, the Google status as the code.

`vertex-gemini` serves Google's models with the `gemini` kind's wire: callers speak Gemini's
native API (`/v1beta/models/{model}:generateContent`, `:streamGenerateContent`), sent to
`…/publishers/google/models/{model}:generateContent` (`:streamGenerateContent?alt=sse`).

Two kinds rather than one because the two publishers count cached tokens differently
(Anthropic beside the input, Gemini inside it: `input_includes_cache`, how a price applies):
one project is two accounts in the file, one per publisher.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from leasegate.providers.anthropic import MESSAGES, X_API_KEY, betas_into_body
from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    OptionError,
    ProviderKind,
    UpstreamRoute,
)
from leasegate.providers.common import ANSWER_HEADERS, COMMON_ERRORS, SDK_HEADERS

VERTEX_VERSION = "vertex-2023-10-16"
_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_LOCATION = re.compile(r"global|[a-z]+-[a-z]+\d{1,2}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
FORWARDED_HEADERS = SDK_HEADERS
"""Not Anthropic's own headers (`anthropic-beta` goes into the body)."""
_GOOGLE_STATUSES = frozenset({"unauthenticated", "permission_denied", "billing_disabled"})
_ANTHROPIC_TYPE = {
    "RESOURCE_EXHAUSTED": "rate_limit_error",
    "PERMISSION_DENIED": "permission_error",
    "UNAUTHENTICATED": "authentication_error",
    "INVALID_ARGUMENT": "invalid_request_error",
    "FAILED_PRECONDITION": "invalid_request_error",
    "NOT_FOUND": "not_found_error",
    "UNAVAILABLE": "overloaded_error",
}


def _vertex_options(entry: Mapping[object, object]) -> dict[str, str]:
    project = entry.get("project")
    if not isinstance(project, str) or not _PROJECT.fullmatch(project):
        raise OptionError("project", "required: a Google Cloud project id")
    location = entry.get("location")
    if not isinstance(location, str) or not _LOCATION.fullmatch(location):
        raise OptionError("location", "required: a Vertex AI region (europe-west1) or global")
    if not _installed("google.auth"):
        raise OptionError("provider", "vertex needs its extra: pip install 'leasegate[vertex]'")
    return {"project": project, "location": location}


def _installed(module: str) -> bool:
    """Whether `module` can be imported; without its parent package (no `google` at all),
    `find_spec` raises rather than answering None."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def model_prefix(options: Mapping[str, str], publisher: str) -> str:
    return (
        f"/v1/projects/{options['project']}/locations/{options['location']}"
        f"/publishers/{publisher}/models/"
    )


def vertex_route(
    path: str, publisher: str, methods: Mapping[str, Endpoint]
) -> UpstreamRoute | None:
    marker = f"/publishers/{publisher}/models/"
    if not path.startswith("/v1/projects/") or marker not in path:
        return None
    model, _, method = path.rpartition(marker)[2].partition(":")
    endpoint = methods.get(method)
    return UpstreamRoute(endpoint, model) if endpoint is not None and model else None


class VertexAccount(ProviderKind):
    option_fields = frozenset({"project", "location"})
    cloud_auth = "google-adc"
    forwarded_headers = FORWARDED_HEADERS
    relayed_headers = ANSWER_HEADERS

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {secret}"),)  # a fixed access token, for tests

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        return _vertex_options(entry)

    def region(self, options: Mapping[str, str]) -> str | None:
        return options.get("location")

    def served_problem(self, served_model: str) -> str | None:
        if _MODEL.fullmatch(served_model):
            return None
        return "a Vertex model name goes into the path: letters, digits, '.', '_', '-', '@'"

    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        return self.upstream_target(endpoint, served_model, options, endpoint.always_streams)


class Vertex(VertexAccount):
    """Anthropic's models on Vertex AI."""

    name = "vertex"
    caller_key_headers = (X_API_KEY,)  # its callers speak Anthropic's wire
    endpoints = (MESSAGES,)
    errors = ErrorVocabulary(
        account=COMMON_ERRORS.account | _GOOGLE_STATUSES,
        model_not_found=COMMON_ERRORS.model_not_found | {"not_found"},
        overloaded=COMMON_ERRORS.overloaded | {"resource_exhausted", "unavailable"},
    )
    input_includes_cache = False

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def upstream_target(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str], stream: bool
    ) -> str:
        method = ":streamRawPredict" if stream else ":rawPredict"
        return model_prefix(options, "anthropic") + served_model + method

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        methods = {"rawPredict": MESSAGES, "streamRawPredict": MESSAGES}
        return vertex_route(path, "anthropic", methods)

    def rewrite_fields(
        self,
        fields: MutableMapping[str, Any],
        served_model: str,
        caller_headers: Sequence[tuple[str, str]],
    ) -> None:
        fields.pop("model", None)
        fields["anthropic_version"] = VERTEX_VERSION
        betas_into_body(fields, caller_headers)

    def error_body(self, status: int, headers: Mapping[str, str], body: bytes) -> bytes | None:
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if isinstance(obj, list) and obj and isinstance(obj[0], dict):
            obj = obj[0]  # Vertex sometimes wraps the error in a list
        error = obj.get("error") if isinstance(obj, dict) else None
        if not isinstance(error, dict) or obj.get("type") == "error":
            return None  # Anthropic's own error, relayed as it is
        google_status = error.get("status")
        name = google_status if isinstance(google_status, str) else None
        error_type = _ANTHROPIC_TYPE.get(name or "", "api_error")
        if name is None and status == 429:
            error_type = "rate_limit_error"
        message = error.get("message")
        text = message if isinstance(message, str) else f"upstream status {status}"
        converted: dict[str, object] = {"type": error_type, "message": text}
        if name and re.fullmatch(r"[A-Z_]{1,64}", name):
            converted["code"] = name
        return json.dumps({"type": "error", "error": converted}).encode()
