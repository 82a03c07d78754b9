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

from leasegate.providers.base import Endpoint, StreamFacts, Usage, Wire
from leasegate.providers.common import FamilyErrors, error_fields_of, openai_family_usage


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


WIRE = ResponsesWire()
RESPONSES = Endpoint("/v1/responses", WIRE)
