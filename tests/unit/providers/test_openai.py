"""The OpenAI-shaped kinds (`openai`, `openrouter`, `openai-compatible`): behaviour tables
(run by test_completeness.py) and what is particular to them."""

from __future__ import annotations

import json

from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.openai import CHAT, EMBEDDINGS
from leasegate.providers.responses import RESPONSES
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

COVERS = ("openai", "openrouter", "openai-compatible")


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\n".encode() + _data(obj)


def _chunk(content: str | None = None, finish: str | None = None, **extra: object) -> bytes:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _data({"object": "chat.completion.chunk", "choices": [choice], **extra})


def _error(status: int, **error: object) -> bytes:
    return json.dumps({"error": {"message": f"status {status}", **error}}).encode()


_USAGE = {
    "prompt_tokens": 31,
    "completion_tokens": 7,
    "prompt_tokens_details": {"cached_tokens": 16},
}
_RESPONSE_USAGE = {
    "input_tokens": 40,
    "output_tokens": 9,
    "input_tokens_details": {"cached_tokens": 32},
}

USAGE = [
    BodyUsage(CHAT, json.dumps({"usage": _USAGE}).encode(), Usage(31, 7, 16, None)),
    BodyUsage(EMBEDDINGS, b'{"usage": {"prompt_tokens": 5, "total_tokens": 5}}', Usage(5)),
    BodyUsage(CHAT, b'{"usage": {"prompt_tokens": -1}}', Usage()),
    BodyUsage(CHAT, b"<html>502</html>", Usage()),
    BodyUsage(RESPONSES, json.dumps({"usage": _RESPONSE_USAGE}).encode(), Usage(40, 9, 32, None)),
]

STREAMS = [
    StreamReading(
        CHAT,
        _chunk("Hi") + _chunk(finish="stop") + _chunk(usage=_USAGE) + b"data: [DONE]\n\n",
        Usage(31, 7, 16, None),
        completed=True,
    ),
    StreamReading(CHAT, _chunk("Hi") + _chunk(" there"), Usage(), completed=False),
    StreamReading(
        CHAT,
        _chunk("Hi") + _data({"error": {"code": 502, "message": "Provider returned error"}}),
        Usage(),
        completed=False,
        error=StreamError(None, "502"),
    ),
    StreamReading(
        RESPONSES,
        _event("response.created", {"type": "response.created", "response": {}})
        + _event(
            "response.completed",
            {"type": "response.completed", "response": {"usage": _RESPONSE_USAGE}},
        ),
        Usage(40, 9, 32, None),
        completed=True,
    ),
    StreamReading(
        RESPONSES,
        _event("error", {"type": "error", "code": "server_error", "message": "boom"}),
        Usage(),
        completed=False,
        error=StreamError(None, "server_error"),
    ),
]

CLASSIFIED = [
    Classified(
        CHAT,
        429,
        _error(429, type="insufficient_quota", code="insufficient_quota"),
        "upstream-error",
        "account",
        True,
        "insufficient_quota",
    ),
    Classified(
        CHAT,
        401,
        _error(401, code="invalid_api_key"),
        "upstream-error",
        "account",
        True,
        "invalid_api_key",
    ),
    Classified(
        CHAT, 429, _error(429, type="requests"), "upstream-error", "model", True, "requests"
    ),
    Classified(
        CHAT,
        404,
        _error(404, code="model_not_found"),
        "upstream-error",
        "model",
        True,
        "model_not_found",
    ),
    Classified(
        CHAT,
        400,
        _error(400, type="invalid_request_error"),
        "upstream-error",
        None,
        False,
        "http-400",
    ),
    Classified(
        CHAT,
        400,
        _error(400, code="context_length_exceeded"),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
    ),
    Classified(
        CHAT,
        None,
        _chunk("Hi") + _data({"error": {"code": 402, "message": "no credits"}}),
        "in-stream-error",
        "account",
        True,
        "http-402",
    ),
    Classified(
        RESPONSES,
        None,
        _event("error", {"type": "error", "code": "server_error"}),
        "in-stream-error",
        "model",
        True,
        "server_error",
    ),
]

RENDERED = [
    Rendered(
        CHAT,
        "upstream-timeout",
        None,
        {
            "error": {
                "type": "api_error",
                "code": "upstream-timeout",
                "message": "the upstream stalled",
                "param": None,
            }
        },
    ),
    Rendered(
        RESPONSES,
        "gateway-shutdown",
        "error",
        {
            "type": "error",
            "code": "gateway-shutdown",
            "message": "the upstream stalled",
            "param": None,
            "error": {
                "type": "api_error",
                "code": "gateway-shutdown",
                "message": "the upstream stalled",
                "param": None,
            },
        },
    ),
]


def test_the_family_sends_the_credential_as_a_bearer_token_to_the_callers_path() -> None:
    for name in COVERS:
        kind = KINDS[name]
        assert kind.credential_headers("sk-1") == (("authorization", "Bearer sk-1"),)
        assert kind.upstream_path(CHAT, "gpt-4o-2024-08-06", {}) == "/v1/chat/completions"
        assert kind.input_includes_cache
