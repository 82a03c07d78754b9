"""Realistic response bodies and SSE streams for the mock upstream, rendered once.

Each (endpoint, stream, chunk count) is rendered with a placeholder model; a request's model is
substituted into the cached bytes, so serving a request costs a dictionary look-up and one
`bytes.replace`, not a JSON encode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["openai", "anthropic", "responses"]

ENDPOINTS: dict[str, Dialect] = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "openai",
    "/v1/embeddings": "openai",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "anthropic",
}
STREAMS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"})

INPUT_TOKENS = 12
CACHED_TOKENS = 4
_MODEL = '"__mock_model__"'
_MODEL_BYTES = _MODEL.encode()
_WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
_CREATED = 1_767_225_600


def _dump(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _word(i: int) -> str:
    return _WORDS[i % len(_WORDS)]


def _text(n: int) -> str:
    return "".join(_word(i) for i in range(n))


def _data(obj: object) -> bytes:
    return f"data: {_dump(obj)}\n\n".encode()


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\ndata: {_dump(obj)}\n\n".encode()


def _openai_usage(n: int) -> dict[str, object]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": n,
        "total_tokens": INPUT_TOKENS + n,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    }


def _chat(n: int) -> bytes:
    return _dump(
        {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": _CREATED,
            "model": "__mock_model__",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _text(n)},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": _openai_usage(n),
        }
    ).encode()


def _chat_stream(n: int, legacy: bool) -> list[bytes]:
    kind = "text_completion" if legacy else "chat.completion.chunk"
    head = {"id": "chatcmpl-mock", "object": kind, "created": _CREATED, "model": "__mock_model__"}

    def choice(i: int, finish: str | None) -> dict[str, object]:
        text = _word(i) if finish is None else ""
        if legacy:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        delta = {"role": "assistant", "content": text} if i == 0 else {"content": text}
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    chunks = [_data({**head, "choices": [choice(i, None)], "usage": None}) for i in range(n)]
    chunks.append(_data({**head, "choices": [choice(n, "stop")], "usage": None}))
    chunks.append(_data({**head, "choices": [], "usage": _openai_usage(n)}))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def _completion(n: int) -> bytes:
    choice = {"index": 0, "text": _text(n), "logprobs": None, "finish_reason": "stop"}
    return _dump(
        {
            "id": "cmpl-mock",
            "object": "text_completion",
            "created": _CREATED,
            "model": "__mock_model__",
            "choices": [choice],
            "usage": _openai_usage(n),
        }
    ).encode()


def _embeddings() -> bytes:
    vector = [round(0.125 * (i - 4), 3) for i in range(8)]
    return _dump(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": vector}],
            "model": "__mock_model__",
            "usage": {"prompt_tokens": INPUT_TOKENS, "total_tokens": INPUT_TOKENS},
        }
    ).encode()


def _response_object(n: int, status: str) -> dict[str, object]:
    done = status == "completed"
    content = [{"type": "output_text", "text": _text(n), "annotations": []}]
    message = {"type": "message", "id": "msg_mock", "status": status, "role": "assistant"}
    usage = {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
        "output_tokens": n,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + n,
    }
    return {
        "id": "resp_mock",
        "object": "response",
        "created_at": _CREATED,
        "status": status,
        "error": None,
        "model": "__mock_model__",
        "output": [{**message, "content": content}] if done else [],
        "usage": usage if done else None,
    }


def _responses_stream(n: int) -> list[bytes]:
    created = {"type": "response.created", "sequence_number": 0}
    chunks = [
        _event("response.created", {**created, "response": _response_object(n, "in_progress")})
    ]
    for i in range(n):
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_mock",
            "output_index": 0,
            "content_index": 0,
            "delta": _word(i),
            "sequence_number": i + 1,
        }
        chunks.append(_event("response.output_text.delta", delta))
    done = {"type": "response.completed", "sequence_number": n + 1}
    chunks.append(
        _event("response.completed", {**done, "response": _response_object(n, "completed")})
    )
    return chunks


def _message_usage(output: int) -> dict[str, object]:
    return {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": CACHED_TOKENS,
    }


def _message(n: int, streaming: bool) -> dict[str, object]:
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": "__mock_model__",
        "content": [] if streaming else [{"type": "text", "text": _text(n)}],
        "stop_reason": None if streaming else "end_turn",
        "stop_sequence": None,
        "usage": _message_usage(1 if streaming else n),
    }


def _messages_stream(n: int) -> list[bytes]:
    chunks = [
        _event("message_start", {"type": "message_start", "message": _message(n, True)}),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _event("ping", {"type": "ping"}),
    ]
    for i in range(n):
        delta = {"type": "text_delta", "text": _word(i)}
        chunks.append(
            _event(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        )
    chunks.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    end = {"stop_reason": "end_turn", "stop_sequence": None}
    chunks.append(
        _event(
            "message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": n}}
        )
    )
    chunks.append(_event("message_stop", {"type": "message_stop"}))
    return chunks


def error_event(dialect: Dialect) -> bytes:
    """A provider's own in-stream error: OpenRouter's error chunk, Anthropic's overload."""
    if dialect == "anthropic":
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return _event("error", {"type": "error", "error": error})
    if dialect == "responses":
        return _event("error", {"type": "error", "code": "server_error", "message": "mock failure"})
    return _data(
        {
            "id": "gen-mock",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": "__mock_model__",
            "error": {"code": 502, "message": "Provider returned error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }
    )


def error_body(status: int) -> bytes:
    error = {"type": "mock_error", "code": f"http_{status}", "message": f"mock status {status}"}
    return json.dumps({"error": error}).encode()


@dataclass(frozen=True, slots=True)
class Rendered:
    """A response with the placeholder model still in it: use `with_model`."""

    body: bytes | None
    chunks: tuple[bytes, ...]


def render(path: str, stream: bool, n: int) -> Rendered:
    streaming = stream and path in STREAMS
    if path == "/v1/embeddings":
        return Rendered(_embeddings(), ())
    if path == "/v1/messages/count_tokens":
        return Rendered(_dump({"input_tokens": INPUT_TOKENS}).encode(), ())
    if path == "/v1/chat/completions":
        return (
            Rendered(None, tuple(_chat_stream(n, False))) if streaming else Rendered(_chat(n), ())
        )
    if path == "/v1/completions":
        if streaming:
            return Rendered(None, tuple(_chat_stream(n, True)))
        return Rendered(_completion(n), ())
    if path == "/v1/responses":
        if streaming:
            return Rendered(None, tuple(_responses_stream(n)))
        return Rendered(_dump(_response_object(n, "completed")).encode(), ())
    if streaming:
        return Rendered(None, tuple(_messages_stream(n)))
    return Rendered(_dump(_message(n, False)).encode(), ())


def with_model(template: bytes, model: str) -> bytes:
    return template.replace(_MODEL_BYTES, json.dumps(model).encode())
