"""Watch an upstream's server-sent events go by: usage, the first error event, completion.

The proxy passes every chunk through unchanged and also feeds it here. The scanner never
re-encodes anything and parses JSON only for the few events that can carry what it needs:
each event's data is first searched (one compiled regex, in C) for a marker key (`"usage"`,
`"error"`, `"finish_reason"` not followed by `null`, `message_stop`, ...), and only a hit is
parsed and confirmed, so generated text that happens to contain a marker changes nothing.

Malformed data is counted by shape (a JSON object must start with `{` and end with `}`), plus
any event that passed the gate and failed to parse: a cheap check that catches cut or garbled
chunks without parsing every one.

With `drop_malformed`, `feed` returns what to forward instead of the chunk: whole events only
(an event's bytes are held until its blank line), each byte-exact, minus every data event that
is not valid JSON (then every event is parsed once). A caller's SDK never sees the garbled one.
"""

from __future__ import annotations

import json
import re

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
_ERROR_EVENT = b"error"
# Events a provider sends as soon as a stream opens, before the model has produced anything:
# they do not count as the first token.
_PREAMBLE_EVENTS = frozenset(
    {
        b"message_start",
        b"content_block_start",
        b"ping",
        b"response.created",
        b"response.in_progress",
        b"response.output_item.added",
        b"response.content_part.added",
    }
)

# One C-speed search per event decides whether it is worth parsing: a key that can carry an
# error, a finish reason, usage or the end of the stream, and is not followed by `null`.
_GATES = {
    "openai": re.compile(rb'"(?:error|finish_reason|usage)"(?!\s*:\s*null)'),
    "anthropic": re.compile(rb'"(?:error|message_start|message_delta|message_stop)"'),
    "responses": re.compile(
        rb'"(?:error|response\.completed|response\.incomplete|response\.failed)"(?!\s*:\s*null)'
    ),
}


class StreamScanner:
    """Feed it the raw bytes of a stream in whatever pieces they arrive; read the results.

    `completed`: OpenAI a non-null finish_reason or `[DONE]`; Anthropic `message_stop`;
    responses `response.completed` (or `response.incomplete`, which also ends normally).
    `error`: the first error event (type and code only, never its message).
    `answering`: an event other than a stream-opening preamble has arrived (the first token,
    an error or the end): what the first-token deadline waits for.
    """

    __slots__ = (
        "_data",
        "_event",
        "_gate",
        "_partial",
        "_pending",
        "answering",
        "completed",
        "dialect",
        "drop_malformed",
        "error",
        "events",
        "malformed",
        "usage",
    )

    def __init__(self, dialect: Dialect, *, drop_malformed: bool = False) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown SSE dialect {dialect!r}")
        self.dialect: Dialect = dialect
        self.drop_malformed = drop_malformed
        self._pending: list[bytes] = []
        """drop_malformed: the lines of the event not yet ended."""
        self.usage = Usage()
        self.error: StreamError | None = None
        self.completed = False
        self.answering = False
        self.malformed = 0
        self.events = 0
        self._gate = _GATES[dialect].search
        self._partial: list[bytes] = []
        self._data: list[bytes] = []
        self._event = b""

    def feed(self, chunk: bytes) -> bytes:
        """Scan `chunk`; returns what to forward: the chunk itself, or with `drop_malformed`
        the events it completed, minus malformed data events."""
        end = chunk.rfind(b"\n")
        if end < 0:
            if chunk:
                # No line ends here: keep the piece; it is joined once, when its line ends.
                self._partial.append(chunk)
            return b"" if self.drop_malformed else chunk
        if self._partial:
            self._partial.append(chunk[:end])
            block = b"".join(self._partial)
            self._partial.clear()
        else:
            block = chunk[:end]
        if end + 1 < len(chunk):
            self._partial.append(chunk[end + 1 :])
        if self.drop_malformed:
            return self._filter(block)
        # The line loop is inlined: it runs for every line of every stream.
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                self._data.append(line[5:])
            elif not line or line == b"\r":
                if self._data:
                    self._dispatch()
                self._event = b""
            elif line.startswith(b"event:"):
                self._event = line[6:].strip()
            # id:, retry: and comment lines (": keep-alive") carry nothing we record.
        return chunk

    def _filter(self, block: bytes) -> bytes:
        """The line loop of `feed` for `drop_malformed`: whole events out, bad ones dropped."""
        out: list[bytes] = []
        pending = self._pending
        for line in block.split(b"\n"):
            pending.append(line)
            if line.startswith(b"data:"):
                self._data.append(line[5:])
            elif not line or line == b"\r":
                keep = self._dispatch() if self._data else True
                self._event = b""
                if keep:
                    out.extend(pending)
                pending.clear()
            elif line.startswith(b"event:"):
                self._event = line[6:].strip()
        return b"".join(line + b"\n" for line in out)

    def close(self) -> bytes:
        """The stream ended: account for a last line or event with no terminator; returns
        what is still to forward (with `drop_malformed`, that event unless it is malformed)."""
        rest = b"".join(self._partial)
        self._partial.clear()
        if not self.drop_malformed:
            if rest:
                self.feed(rest + b"\n")
            if self._data:
                self._dispatch()
            return b""
        lines, self._pending = self._pending, []
        if rest:
            lines.append(rest)
            if rest.startswith(b"data:"):
                self._data.append(rest[5:])
            elif rest.startswith(b"event:"):
                self._event = rest[6:].strip()
        keep = self._dispatch() if self._data else True
        if not keep or not lines:
            return b""
        text = b"\n".join(lines)
        return text if rest else text + b"\n"

    def _dispatch(self) -> bool:
        """Record one event; False when it is to be dropped: its data is not a JSON object
        (an error event is never dropped, whatever its data)."""
        data = self._data
        payload = (data[0] if len(data) == 1 else b"\n".join(data)).strip()
        self._data = []
        event = self._event
        self.events += 1
        if not self.answering and event not in _PREAMBLE_EVENTS:
            self.answering = True
        if payload == _DONE:
            if self.dialect != "anthropic":
                self.completed = True
            return True
        if not (payload.startswith(b"{") and payload.endswith(b"}")):
            self.malformed += 1
            if event == _ERROR_EVENT:
                self._record_error(None, None)
            return event == _ERROR_EVENT  # an error event still reaches the caller
        if event != _ERROR_EVENT and not self.drop_malformed and self._gate(payload) is None:
            return True
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            self.malformed += 1
            return event == _ERROR_EVENT
        if isinstance(obj, dict) and (event == _ERROR_EVENT or self._gate(payload) is not None):
            self._record(event, obj)
        return True

    def _record(self, event: bytes, obj: dict[str, object]) -> None:
        if event == _ERROR_EVENT:
            self._record_error(*error_fields_of(obj))
        elif self.dialect == "openai":
            self._openai(obj)
        elif self.dialect == "anthropic":
            self._anthropic(obj)
        else:
            self._responses(obj)

    def _record_error(self, type_: str | None, code: str | None) -> None:
        if self.error is None:
            self.error = StreamError(type_, code)

    def _openai(self, obj: dict[str, object]) -> None:
        if obj.get("error") is not None:
            self._record_error(*error_fields_of(obj))
        if not self.completed and _has_finish_reason(obj):
            self.completed = True
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = openai_usage(usage)

    def _anthropic(self, obj: dict[str, object]) -> None:
        kind = obj.get("type")
        if kind == "error":
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

    def _responses(self, obj: dict[str, object]) -> None:
        kind = obj.get("type")
        if kind == "error":
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
