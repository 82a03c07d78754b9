"""OpenAI's responses API (`POST /v1/responses`): its wire, served by the OpenAI-shaped kinds.

Usage is the response object's `usage` (`input_tokens`, `output_tokens`,
`input_tokens_details.cached_tokens`); a stream ends with `response.completed` (or
`response.incomplete`, which also ends normally) and fails with `event: error` or
`response.failed`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from leasegate.providers.base import (
    EXAMPLE_MODEL,
    Endpoint,
    Example,
    StreamFacts,
    Usage,
    Wire,
)
from leasegate.providers.common import (
    CACHED_TOKENS,
    CREATED,
    INPUT_TOKENS,
    FamilyErrors,
    dump,
    error_fields_of,
    event,
    family_error_body,
    openai_family_usage,
    text,
    word,
)


def responses_usage(usage: Mapping[str, object]) -> Usage:
    return openai_family_usage(
        usage,
        input_key="input_tokens",
        output_key="output_tokens",
        details_key="input_tokens_details",
    )


_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesWire(FamilyErrors, Wire):
    name = "responses"
    gate = re.compile(
        rb'"(?:error|response\.completed|response\.incomplete|response\.failed)"(?!\s*:\s*null)'
    )
    preamble_events = frozenset(
        {
            b"response.created",
            b"response.in_progress",
            b"response.output_item.added",
            b"response.content_part.added",
        }
    )
    done_completes = True
    counts_text = True

    def text_chars(self, obj: Mapping[str, object]) -> int:
        """Every `*.delta` event (output text, function-call arguments, reasoning summary)
        carries its new text as `delta`; usage comes only with the stream's last event."""
        delta = obj.get("delta")
        return len(delta) if type(delta) is str else 0

    def usage(self, body: Mapping[str, object]) -> Usage:
        usage = body.get("usage")
        return responses_usage(usage) if isinstance(usage, dict) else Usage()

    def read_event(self, facts: StreamFacts, event: bytes, obj: dict[str, object]) -> None:
        kind = obj.get("type")
        if kind == "error":
            facts.record_error(*error_fields_of(obj))
            return
        if kind not in _ENDS:
            return
        response = obj.get("response")
        if not isinstance(response, dict):
            return
        usage = response.get("usage")
        if isinstance(usage, dict):
            facts.usage = responses_usage(usage)
        if kind == "response.failed":
            facts.record_error(*error_fields_of(response))
        else:
            facts.completed = True

    def error_event(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        # The responses SDK raises on `event: error` whose data has an `error` object; the
        # top-level fields keep it a valid ResponseErrorEvent for clients that parse it.
        error = {"type": error_type, "code": code, "message": message, "param": None}
        body = {"type": "error", "code": code, "message": message, "param": None, "error": error}
        return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"

    def example(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        if stream:
            return Example(None, tuple(_stream(n)))
        return Example(dump(_response(n, "completed")).encode())

    def example_error_body(self, status: int) -> bytes:
        return family_error_body(status)

    def example_error_event(self) -> bytes:
        return event("error", {"type": "error", "code": "server_error", "message": "mock failure"})


WIRE = ResponsesWire()
RESPONSES = Endpoint("/v1/responses", WIRE)


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
