"""Watch an upstream's server-sent events go by: usage, the first error event, completion.

The proxy passes every chunk through unchanged and also feeds it here. The scanner never
re-encodes anything and parses JSON only for the few events that can carry what it needs:
each event's data is first tested with C-speed substring checks for a marker (`"usage"`,
`"error"`, `"finish_reason"`, `message_stop`, ...), and only a hit is parsed and confirmed.

Malformed data is counted by shape (a JSON object must start with `{` and end with `}`), plus
any gated event that fails to parse: a cheap check that catches cut or garbled chunks without
parsing every one.
"""

from __future__ import annotations

import json

from leasegate.upstream.payloads import (
    Dialect,
    StreamError,
    Usage,
    anthropic_usage,
    error_fields_of,
    merge_usage,
    openai_usage,
    responses_usage,
    usage_from_body,
)

__all__ = [
    "DIALECTS",
    "Dialect",
    "StreamError",
    "StreamScanner",
    "Usage",
    "error_event",
    "usage_from_body",
]

DIALECTS: tuple[Dialect, ...] = ("openai", "anthropic", "responses")

_DONE = b"[DONE]"
_ERROR = b'"error"'
_ERROR_EVENT = b"error"
_FINISH = b'"finish_reason"'
_FINISH_NULL = (b'"finish_reason":null', b'"finish_reason": null')
_USAGE = b'"usage"'
_USAGE_NULL = (b'"usage":null', b'"usage": null')
_MESSAGE_START = b'"message_start"'
_MESSAGE_DELTA = b'"message_delta"'
_MESSAGE_STOP = b'"message_stop"'
_RESPONSE_END = (b'"response.completed"', b'"response.incomplete"', b'"response.failed"')

_UNPARSED: object = object()


def _loads(payload: bytes) -> object:
    try:
        return json.loads(payload)
    except (ValueError, RecursionError):
        return _UNPARSED


def _more_than_nulls(payload: bytes, marker: bytes, nulls: tuple[bytes, bytes]) -> bool:
    return payload.count(marker) > payload.count(nulls[0]) + payload.count(nulls[1])


class StreamScanner:
    """Feed it the raw bytes of a stream in whatever pieces they arrive; read the results.

    `completed`: OpenAI a non-null finish_reason or `[DONE]`; Anthropic `message_stop`;
    responses `response.completed` (or `response.incomplete`, which also ends normally).
    `error`: the first error event (type and code only, never its message).
    """

    __slots__ = (
        "_data",
        "_event",
        "_partial",
        "completed",
        "dialect",
        "error",
        "events",
        "malformed",
        "usage",
    )

    def __init__(self, dialect: Dialect) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown SSE dialect {dialect!r}")
        self.dialect: Dialect = dialect
        self.usage = Usage()
        self.error: StreamError | None = None
        self.completed = False
        self.malformed = 0
        self.events = 0
        self._partial: list[bytes] = []
        self._data: list[bytes] = []
        self._event = b""

    def feed(self, chunk: bytes) -> None:
        end = chunk.rfind(b"\n")
        if end < 0:
            if chunk:
                # No line ends here: keep the piece; it is joined once, when its line ends.
                self._partial.append(chunk)
            return
        if self._partial:
            self._partial.append(chunk[:end])
            block = b"".join(self._partial)
            self._partial.clear()
        else:
            block = chunk[:end]
        if end + 1 < len(chunk):
            self._partial.append(chunk[end + 1 :])
        for line in block.split(b"\n"):
            self._line(line)

    def close(self) -> None:
        """The stream ended: account for a last line or event with no terminator."""
        if self._partial:
            line = b"".join(self._partial)
            self._partial.clear()
            self._line(line)
        if self._data:
            self._dispatch()

    def _line(self, line: bytes) -> None:
        if line.startswith(b"data:"):
            self._data.append(line[5:])
        elif not line or line == b"\r":
            if self._data:
                self._dispatch()
            self._event = b""
        elif line.startswith(b"event:"):
            self._event = line[6:].strip()
        # id:, retry: and comment lines (": keep-alive") carry nothing we record.

    def _dispatch(self) -> None:
        data = self._data
        payload = (data[0] if len(data) == 1 else b"\n".join(data)).strip()
        self._data = []
        event = self._event
        self.events += 1
        if payload == _DONE:
            if self.dialect != "anthropic":
                self.completed = True
            return
        if not (payload.startswith(b"{") and payload.endswith(b"}")):
            self.malformed += 1
            if event == _ERROR_EVENT:
                self._record_error(None, None)
            return
        if self.dialect == "openai":
            self._openai(payload, event)
        elif self.dialect == "anthropic":
            self._anthropic(payload, event)
        else:
            self._responses(payload, event)

    def _parse(self, payload: bytes) -> dict[str, object] | None:
        parsed = _loads(payload)
        if parsed is _UNPARSED:
            self.malformed += 1
            return None
        return parsed if isinstance(parsed, dict) else None

    def _record_error(self, type_: str | None, code: str | None) -> None:
        if self.error is None:
            self.error = StreamError(type_, code)

    def _openai(self, payload: bytes, event: bytes) -> None:
        wants_error = event == _ERROR_EVENT or _ERROR in payload
        wants_finish = not self.completed and _FINISH in payload
        wants_usage = _USAGE in payload
        if not (wants_error or wants_finish or wants_usage):
            return
        if wants_finish:
            wants_finish = _more_than_nulls(payload, _FINISH, _FINISH_NULL)
        if wants_usage:
            wants_usage = _more_than_nulls(payload, _USAGE, _USAGE_NULL)
        if not (wants_error or wants_finish or wants_usage):
            return
        obj = self._parse(payload)
        if obj is None:
            return
        error = obj.get("error")
        if error is not None or event == _ERROR_EVENT:
            self._record_error(*error_fields_of(obj))
        if wants_finish and _has_finish_reason(obj):
            self.completed = True
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = openai_usage(usage)

    def _anthropic(self, payload: bytes, event: bytes) -> None:
        if not (
            event == _ERROR_EVENT
            or _ERROR in payload
            or _MESSAGE_START in payload
            or _MESSAGE_DELTA in payload
            or _MESSAGE_STOP in payload
        ):
            return
        obj = self._parse(payload)
        if obj is None:
            return
        kind = obj.get("type")
        if kind == "error" or event == _ERROR_EVENT:
            self._record_error(*error_fields_of(obj))
        elif kind == "message_start":
            message = obj.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                self.usage = merge_usage(self.usage, anthropic_usage(usage))
        elif kind == "message_delta":
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self.usage = merge_usage(self.usage, anthropic_usage(usage))
        elif kind == "message_stop":
            self.completed = True

    def _responses(self, payload: bytes, event: bytes) -> None:
        if not (
            event == _ERROR_EVENT
            or _ERROR in payload
            or any(marker in payload for marker in _RESPONSE_END)
        ):
            return
        obj = self._parse(payload)
        if obj is None:
            return
        kind = obj.get("type")
        if kind == "error" or event == _ERROR_EVENT:
            self._record_error(*error_fields_of(obj))
            return
        if kind not in ("response.completed", "response.incomplete", "response.failed"):
            return
        response = obj.get("response")
        if not isinstance(response, dict):
            return
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.usage = responses_usage(usage)
        if kind == "response.failed":
            self._record_error(*error_fields_of(response))
        else:
            self.completed = True


def _has_finish_reason(obj: dict[str, object]) -> bool:
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") is not None for c in choices)


def error_event(
    dialect: Dialect, code: str, message: str, *, error_type: str = "api_error"
) -> bytes:
    """An SSE error event in the provider's own shape, so the caller's SDK raises on it.

    The gateway appends one when it must end a 200 stream early (an idle upstream, a drain).
    `message` goes to the caller: it must never carry a credential or upstream text.
    """
    if dialect == "anthropic":
        body = {"type": "error", "error": {"type": error_type, "code": code, "message": message}}
        return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"
    error = {"type": error_type, "code": code, "message": message, "param": None}
    if dialect == "responses":
        # The responses SDK raises on `event: error` whose data has an `error` object; the
        # top-level fields keep it a valid ResponseErrorEvent for clients that parse it.
        event = {"type": "error", "code": code, "message": message, "param": None, "error": error}
        return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
