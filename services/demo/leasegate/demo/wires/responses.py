"""OpenAI's responses API wire: a response object, and its stream of `response.*` events."""

from __future__ import annotations

from leasegate.demo.wires.base import (
    CACHED_TOKENS,
    CREATED,
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


class ResponsesExamples(WireExamples):
    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        if stream:
            return Example(None, tuple(_stream(n)))
        return Example(dump(_response(n, "completed")).encode())

    def error_body(self, status: int) -> bytes:
        return family_error_body(status)

    def error_event(self) -> bytes:
        return event("error", {"type": "error", "code": "server_error", "message": "mock failure"})


RESPONSES_EXAMPLES = ResponsesExamples()


def _response(n: int, status: str) -> dict[str, object]:
    done = status == "completed"
    content = [{"type": "output_text", "text": text(n), "annotations": []}]
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
        "created_at": CREATED,
        "status": status,
        "error": None,
        "model": EXAMPLE_MODEL,
        "output": [{**message, "content": content}] if done else [],
        "usage": usage if done else None,
    }


def _stream(n: int) -> list[bytes]:
    created = {"type": "response.created", "sequence_number": 0}
    chunks = [event("response.created", {**created, "response": _response(n, "in_progress")})]
    for i in range(n):
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_mock",
            "output_index": 0,
            "content_index": 0,
            "delta": word(i),
            "sequence_number": i + 1,
        }
        chunks.append(event("response.output_text.delta", delta))
    done = {"type": "response.completed", "sequence_number": n + 1}
    chunks.append(event("response.completed", {**done, "response": _response(n, "completed")}))
    return chunks
