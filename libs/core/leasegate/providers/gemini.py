"""Google's Gemini API (native): the `gemini` kind and its wire.

Endpoints: `POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent` (always a
stream: sent upstream with `?alt=sse`) and `:countTokens` (no completion). The model is in
the path, not the body: the proxy checks the path's model against the key and sends the
served name in the upstream path. The credential goes as `x-goog-api-key`.

Usage is `usageMetadata`: `promptTokenCount` (cached tokens included),
`candidatesTokenCount` plus `thoughtsTokenCount` as output, `cachedContentTokenCount`; in a
stream every chunk repeats it and the last one is complete. A stream ends with a candidate's
`finishReason` (there is no `[DONE]`). Errors are `{"error": {"code": 429, "message": ...,
"status": "RESOURCE_EXHAUSTED", "details": [...]}}`, in a body or as a stream's data event:
`status` is read as the type, an `ErrorInfo` detail's `reason` (`API_KEY_INVALID`) or else
the numeric code as the code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    KeyHeader,
    ProviderKind,
    StreamFacts,
    UpstreamRoute,
    Usage,
    Wire,
    count,
    identifier,
)
from leasegate.providers.common import ANSWER_HEADERS, SDK_HEADERS, error_of, message_of

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_V1 = "/v1/models/"
_ANY_VERSION = re.compile(r"/v1[a-z0-9]*/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)")
"""A Gemini SDK's model call under any API version (`google-genai`'s `api_version`)."""


def gemini_usage(meta: Mapping[str, object]) -> Usage:
    output = count(meta.get("candidatesTokenCount"))
    thoughts = count(meta.get("thoughtsTokenCount"))
    if thoughts is not None:
        output = thoughts + (output or 0)
    return Usage(
        input_tokens=count(meta.get("promptTokenCount")),
        output_tokens=output,
        cache_read_input_tokens=count(meta.get("cachedContentTokenCount")),
    )


def _finished(obj: dict[str, object]) -> bool:
    candidates = obj.get("candidates")
    if not isinstance(candidates, list):
        return False
    return any(isinstance(c, dict) and c.get("finishReason") is not None for c in candidates)


class GeminiWire(Wire):
    name = "gemini"
    done_completes = False  # a candidate's `finishReason` ends it
    gate = re.compile(rb'"(?:error|finishReason|usageMetadata)"(?!\s*:\s*null)')

    def usage(self, body: Mapping[str, object]) -> Usage:
        meta = body.get("usageMetadata")
        return gemini_usage(meta) if isinstance(meta, dict) else Usage()

    def read_event(self, facts: StreamFacts, event: bytes, obj: dict[str, object]) -> None:
        if isinstance(obj.get("error"), dict):
            facts.record_error(*self.error_fields(obj))
            return
        meta = obj.get("usageMetadata")
        if isinstance(meta, dict):
            facts.usage = gemini_usage(meta)
        if not facts.completed and _finished(obj):
            facts.completed = True

    def error_fields(self, obj: Mapping[str, object]) -> tuple[str | None, str | None]:
        error = error_of(obj)
        if error is None:
            return None, None
        code = None
        details = error.get("details")
        if isinstance(details, list):
            for detail in details:
                if isinstance(detail, dict) and detail.get("@type") == _ERROR_INFO:
                    code = identifier(detail.get("reason"))
                    break
        return identifier(error.get("status")), code or identifier(error.get("code"))

    def context_length(self, obj: Mapping[str, object]) -> bool:
        # 400 INVALID_ARGUMENT "The input token count (N) exceeds the maximum number of
        # tokens allowed (M)."
        error = error_of(obj)
        if error is None or error.get("status") != "INVALID_ARGUMENT":
            return False
        return "exceeds the maximum number of tokens" in message_of(error)

    def error_event(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        http, status = (504, "DEADLINE_EXCEEDED") if "timeout" in code else (503, "UNAVAILABLE")
        reason = {"@type": _ERROR_INFO, "reason": code, "domain": "leasegate"}
        error = {"code": http, "message": message, "status": status, "details": [reason]}
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


WIRE = GeminiWire()
GENERATE = Endpoint("/v1beta/models/{model}:generateContent", WIRE, streams=False)
STREAM_GENERATE = Endpoint(
    "/v1beta/models/{model}:streamGenerateContent", WIRE, always_streams=True
)
COUNT_TOKENS = Endpoint("/v1beta/models/{model}:countTokens", WIRE, streams=False, completion=False)

X_GOOG_API_KEY = KeyHeader("x-goog-api-key")
"""How Google's SDKs present a key."""


class Gemini(ProviderKind):
    name = "gemini"
    caller_key_headers = (X_GOOG_API_KEY,)
    forwarded_headers = SDK_HEADERS
    relayed_headers = ANSWER_HEADERS
    endpoints = (GENERATE, STREAM_GENERATE, COUNT_TOKENS)
    errors = ErrorVocabulary(
        account=frozenset(
            {
                "unauthenticated",
                "permission_denied",
                "api_key_invalid",
                "api_key_service_blocked",
                "service_disabled",
                "consumer_suspended",
                "billing_disabled",
            }
        ),
        model_not_found=frozenset({"not_found"}),
        rate_limited=frozenset({"resource_exhausted", "rate_limit_exceeded"}),
    )
    input_includes_cache = True
    caller_prefix = _V1

    def caller_route(self, path: str) -> UpstreamRoute | None:
        """`google-genai` defaults to API version v1 (`/v1/models/{model}:generateContent`):
        served as the same v1beta endpoint (v1beta takes every v1 body)."""
        return self.upstream_route("/v1beta/models/" + path[len(_V1) :])

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("x-goog-api-key", secret),)

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        return {}

    def served_problem(self, served_model: str) -> str | None:
        if _MODEL.fullmatch(served_model):
            return None
        return "a Gemini model name goes into the path: letters, digits, '.', '_', '-'"

    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        path = endpoint.with_model(served_model)
        return path + "?alt=sse" if endpoint.always_streams else path

    def path_hint(self, path: str) -> str | None:
        if (call := _ANY_VERSION.fullmatch(path)) is None:
            return None
        model, method = call["model"], call["method"]
        served = [e.path.rpartition(":")[2] for e in self.endpoints]
        if method in served:
            return (
                f"Gemini is served at /v1beta/models/{model}:{method}"
                f" and /v1/models/{model}:{method} (google-genai's api_version v1beta or v1)"
            )
        return f"{method} is not served; /v1beta/models/{model}:" + "|".join(served) + " are"

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        for endpoint in self.endpoints:
            if (model := endpoint.model_of(path)) is not None:
                return UpstreamRoute(endpoint, model)
        return None
