"""The `anthropic` kind: behaviour tables (run by test_completeness.py) and what is
particular to it."""

from __future__ import annotations

import json

from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.anthropic import COUNT_TOKENS, MESSAGES
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

COVERS = ("anthropic",)

_USAGE = {
    "input_tokens": 25,
    "output_tokens": 1,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 8,
}


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()


def _error(type_: str, message: str = "nope") -> bytes:
    return json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode()


_START = _event("message_start", {"type": "message_start", "message": {"usage": _USAGE}})
_DELTA = _event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 9}})

USAGE = [
    BodyUsage(
        MESSAGES, json.dumps({"type": "message", "usage": _USAGE}).encode(), Usage(25, 1, 100, 8)
    ),
    BodyUsage(COUNT_TOKENS, b'{"input_tokens": 12}', Usage()),
]

STREAMS = [
    StreamReading(
        MESSAGES,
        _START + _DELTA + _event("message_stop", {"type": "message_stop"}),
        Usage(25, 9, 100, 8),
        completed=True,
    ),
    StreamReading(
        MESSAGES, _START + _DELTA + b"data: [DONE]\n\n", Usage(25, 9, 100, 8), completed=False
    ),
    StreamReading(
        MESSAGES,
        _START + _event("error", json.loads(_error("overloaded_error"))),
        Usage(25, 1, 100, 8),
        completed=False,
        error=StreamError("overloaded_error", None),
    ),
]

CLASSIFIED = [
    Classified(
        MESSAGES, 400, _error("billing_error"), "upstream-error", "account", True, "billing_error"
    ),
    Classified(
        MESSAGES,
        529,
        _error("overloaded_error"),
        "upstream-error",
        "model",
        True,
        "overloaded_error",
    ),
    Classified(
        MESSAGES, 404, _error("not_found_error"), "upstream-error", "model", True, "not_found_error"
    ),
    Classified(
        MESSAGES, 400, _error("invalid_request_error"), "upstream-error", None, False, "http-400"
    ),
    Classified(
        MESSAGES,
        400,
        _error("invalid_request_error", "prompt is too long: 9001 tokens > 8192"),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
    ),
    Classified(
        MESSAGES,
        None,
        _START + _event("error", json.loads(_error("overloaded_error"))),
        "in-stream-error",
        "model",
        True,
        "overloaded_error",
    ),
]

RENDERED = [
    Rendered(
        MESSAGES,
        "upstream-timeout",
        "error",
        {
            "type": "error",
            "error": {
                "type": "api_error",
                "code": "upstream-timeout",
                "message": "the upstream stalled",
            },
        },
    ),
]


def test_the_key_goes_as_x_api_key_with_a_default_version() -> None:
    kind = KINDS["anthropic"]
    assert kind.credential_headers("sk-ant") == (("x-api-key", "sk-ant"),)
    assert kind.default_headers() == (("anthropic-version", "2023-06-01"),)
    assert not kind.input_includes_cache  # cached tokens are counted beside the input
