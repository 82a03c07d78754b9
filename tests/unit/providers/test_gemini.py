"""The `gemini` kind: behaviour tables (run by test_completeness.py), the model in the path
and its accounts-file entry."""

from __future__ import annotations

import json

import pytest

from leasegate.accounts import AccountsFileError, parse_accounts
from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.gemini import COUNT_TOKENS, GENERATE, STREAM_GENERATE
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

COVERS = ("gemini",)
GEMINI = KINDS["gemini"]
_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\r\n"  # Google ends events with \r\n


def _answer(text: str, finish: str | None = None, **meta: int) -> dict[str, object]:
    candidate: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": meta, "modelVersion": "gemini-2.0-flash"}


def _error(code: int, status: str, message: str = "nope", reason: str | None = None) -> bytes:
    error: dict[str, object] = {"code": code, "message": message, "status": status}
    if reason:
        error["details"] = [{"@type": _INFO, "reason": reason, "domain": "googleapis.com"}]
    return json.dumps({"error": error}).encode()


_FULL = {"promptTokenCount": 30, "candidatesTokenCount": 8, "cachedContentTokenCount": 10}

USAGE = [
    BodyUsage(
        GENERATE, json.dumps(_answer("Hi", "STOP", **_FULL)).encode(), Usage(30, 8, 10, None)
    ),
    # thinking models: thoughts are billed as output
    BodyUsage(
        GENERATE,
        json.dumps(
            _answer("Hi", "STOP", promptTokenCount=5, candidatesTokenCount=2, thoughtsTokenCount=40)
        ).encode(),
        Usage(5, 42, None, None),
    ),
    BodyUsage(COUNT_TOKENS, b'{"totalTokens": 12}', Usage()),
    BodyUsage(GENERATE, b'{"usage": {"prompt_tokens": 3}}', Usage()),
]

STREAMS = [
    StreamReading(
        STREAM_GENERATE,
        _data(_answer("Hel", promptTokenCount=30)) + _data(_answer("lo", "STOP", **_FULL)),
        Usage(30, 8, 10, None),
        completed=True,
    ),
    StreamReading(
        STREAM_GENERATE, _data(_answer("Hel", promptTokenCount=30)), Usage(30), completed=False
    ),
    StreamReading(
        STREAM_GENERATE,
        _data(_answer("Hel", promptTokenCount=30))
        + _error(503, "UNAVAILABLE").join([b"data: ", b"\n\n"]),
        Usage(30),
        completed=False,
        error=StreamError("UNAVAILABLE", "503"),
    ),
]

CLASSIFIED = [
    Classified(
        STREAM_GENERATE,
        429,
        _error(429, "RESOURCE_EXHAUSTED"),
        "upstream-error",
        "model",
        True,
        "resource_exhausted",
    ),
    Classified(
        GENERATE,
        401,
        _error(401, "UNAUTHENTICATED"),
        "upstream-error",
        "account",
        True,
        "unauthenticated",
    ),
    Classified(
        GENERATE,
        403,
        _error(403, "PERMISSION_DENIED"),
        "upstream-error",
        "account",
        True,
        "permission_denied",
    ),
    # a wrong API key is a 400 INVALID_ARGUMENT whose ErrorInfo says API_KEY_INVALID
    Classified(
        GENERATE,
        400,
        _error(400, "INVALID_ARGUMENT", "API key not valid.", "API_KEY_INVALID"),
        "upstream-error",
        "account",
        True,
        "api_key_invalid",
    ),
    Classified(
        GENERATE,
        400,
        _error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
    ),
    Classified(
        GENERATE, 400, _error(400, "INVALID_ARGUMENT"), "upstream-error", None, False, "http-400"
    ),
    Classified(
        GENERATE, 404, _error(404, "NOT_FOUND"), "upstream-error", "model", True, "not_found"
    ),
    Classified(
        GENERATE, 503, _error(503, "UNAVAILABLE"), "upstream-error", "model", True, "http-503"
    ),
    Classified(
        STREAM_GENERATE,
        None,
        _error(500, "INTERNAL").join([b"data: ", b"\n\n"]),
        "in-stream-error",
        "model",
        True,
        "internal",
    ),
    Classified(
        STREAM_GENERATE,
        None,
        _error(403, "PERMISSION_DENIED").join([b"data: ", b"\n\n"]),
        "in-stream-error",
        "account",
        True,
        "permission_denied",
    ),
]

RENDERED = [
    Rendered(
        STREAM_GENERATE,
        "upstream-timeout",
        None,
        {
            "error": {
                "code": 504,
                "message": "the upstream stalled",
                "status": "DEADLINE_EXCEEDED",
                "details": [{"@type": _INFO, "reason": "upstream-timeout", "domain": "leasegate"}],
            }
        },
    ),
    Rendered(
        STREAM_GENERATE,
        "gateway-shutdown",
        None,
        {
            "error": {
                "code": 503,
                "message": "the upstream stalled",
                "status": "UNAVAILABLE",
                "details": [{"@type": _INFO, "reason": "gateway-shutdown", "domain": "leasegate"}],
            }
        },
    ),
]


def test_the_model_is_in_the_path_and_a_stream_asks_for_sse() -> None:
    assert GEMINI.upstream_path(GENERATE, "gemini-2.0-flash-001", {}) == (
        "/v1beta/models/gemini-2.0-flash-001:generateContent"
    )
    assert GEMINI.upstream_path(STREAM_GENERATE, "gemini-2.0-flash-001", {}) == (
        "/v1beta/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse"
    )
    assert GENERATE.model_of("/v1beta/models/gemini-pro:generateContent") == "gemini-pro"
    assert GENERATE.model_of("/v1beta/models/:generateContent") is None
    assert GENERATE.model_of("/v1beta/models/a/b:generateContent") is None
    assert STREAM_GENERATE.model_of("/v1beta/models/gemini-pro:generateContent") is None
    assert GEMINI.credential_headers("g-key") == (("x-goog-api-key", "g-key"),)


def test_a_gemini_account_in_the_accounts_file() -> None:
    entry = {
        "id": "gemini-main",
        "provider": "gemini",
        "base_url": "https://generativelanguage.googleapis.com",
        "credential_env": "LEASEGATE_CRED_GEMINI",
        "models": {"flash": "gemini-2.0-flash-001"},
    }
    (account,) = parse_accounts({"accounts": [entry]}, {"LEASEGATE_CRED_GEMINI"}).accounts
    assert account.kind is GEMINI
    assert account.configured
    with pytest.raises(AccountsFileError, match=r"field 'models': model 'flash': a Gemini model"):
        parse_accounts({"accounts": [{**entry, "models": {"flash": "../x"}}]}, set())


def test_google_genai_default_v1_paths_are_the_v1beta_endpoints_and_others_are_named() -> None:
    from leasegate.providers import caller_route, path_hint
    from leasegate.providers.gemini import GENERATE, STREAM_GENERATE

    route = caller_route("/v1/models/flash:streamGenerateContent")
    assert route is not None
    assert (route.endpoint, route.model) == (STREAM_GENERATE, "flash")
    assert caller_route("/v1/models/flash:generateContent").endpoint is GENERATE  # type: ignore[union-attr]
    assert caller_route("/v1/models/flash:embedContent") is None
    assert "/v1beta/models/flash:generateContent" in (
        path_hint("/v1alpha/models/flash:generateContent") or ""
    )
    assert "embedContent is not served" in (path_hint("/v1/models/flash:embedContent") or "")
    assert path_hint("/v1/chat/completions") is None
