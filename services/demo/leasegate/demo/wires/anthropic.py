"""Anthropic's Messages wire: a message, a token count, and the stream from `message_start`
to `message_stop`; the in-stream `overloaded_error`."""

from __future__ import annotations

from leasegate.demo.wires.base import (
    CACHED_TOKENS,
    EXAMPLE_MODEL,
    INPUT_TOKENS,
    Example,
    WireExamples,
    dump,
    event,
    family_error_body,
    text,
    word,
)
from leasegate.providers import Endpoint
from leasegate.providers.anthropic import COUNT_TOKENS


class MessagesExamples(WireExamples):
    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        if endpoint is COUNT_TOKENS:
            return Example(dump({"input_tokens": INPUT_TOKENS}).encode())
        if stream:
            return Example(None, tuple(_stream(n)))
        return Example(dump(_message(n, streaming=False)).encode())

    def error_body(self, status: int) -> bytes:
        return family_error_body(status)

    def error_event(self) -> bytes:
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return event("error", {"type": "error", "error": error})


MESSAGES_EXAMPLES = MessagesExamples()


def _message(n: int, streaming: bool) -> dict[str, object]:
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": EXAMPLE_MODEL,
        "content": [] if streaming else [{"type": "text", "text": text(n)}],
        "stop_reason": None if streaming else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": INPUT_TOKENS,
            "output_tokens": 1 if streaming else n,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": CACHED_TOKENS,
        },
    }


def _stream(n: int) -> list[bytes]:
    block = {"type": "text", "text": ""}
    chunks = [
        event("message_start", {"type": "message_start", "message": _message(n, True)}),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        event("ping", {"type": "ping"}),
    ]
    for i in range(n):
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": word(i)},
        }
        chunks.append(event("content_block_delta", delta))
    chunks.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    end = {"stop_reason": "end_turn", "stop_sequence": None}
    delta_event = {"type": "message_delta", "delta": end, "usage": {"output_tokens": n}}
    chunks.append(event("message_delta", delta_event))
    chunks.append(event("message_stop", {"type": "message_stop"}))
    return chunks
