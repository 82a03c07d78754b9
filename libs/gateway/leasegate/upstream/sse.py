"""Watch an upstream's server-sent events go by: usage, the first error event, completion.

The proxy passes every chunk through unchanged and also feeds it here. The scanner never
re-encodes anything and parses JSON only for the few events that can carry what it needs:
each event's data is first searched (the wire's one compiled regex, in C) for a marker key
(`"usage"`, `"error"`, `"finish_reason"` not followed by `null`, `message_stop`, ...), and only
a hit is parsed and confirmed, by the wire (`Wire.read_event`, leasegate.providers), so
generated text that happens to contain a marker changes nothing.

Malformed data is counted by shape (a JSON object must start with `{` and end with `}`), plus
any event that passed the gate and failed to parse: a cheap check that catches cut or garbled
chunks without parsing every one.

With `drop_malformed`, `feed` returns what to forward instead of the chunk: whole events only
(an event's bytes are held until its blank line), each byte-exact, minus every data event that
is not valid JSON (then every event is parsed once). A caller's SDK never sees the garbled one.

With `strip_usage_only` (the proxy asked the upstream for a usage report the caller did not
ask for, `Wire.ask_usage`), `feed` also returns whole events only, minus the events that carry
nothing but that report (`Wire.usage_only`); the report is read all the same.

`text_chars` counts the generated text of the events parsed (`Wire.text_chars`, for a wire that
counts it), plus the whole data of the events not parsed (with neither mode set, an event that
does not pass the gate): what a usage estimate is made from when no usage ever arrives.
"""

from __future__ import annotations

import json

import orjson

from leasegate.providers import StreamError, Usage, Wire, wire_named

__all__ = [
    "StreamError",
    "StreamScanner",
    "Usage",
    "error_event",
    "usage_from_body",
]

_DONE = b"[DONE]"
_ERROR_EVENT = b"error"


def _wire(wire: Wire | str) -> Wire:
    return wire_named(wire) if isinstance(wire, str) else wire


class StreamScanner:
    """Feed it the raw bytes of a stream in whatever pieces they arrive; read the results.

    What each event means is the wire's to say (`Wire.read_event`, leasegate.providers):
    `completed`: the answer ended normally (OpenAI a non-null finish_reason or `[DONE]`,
    Anthropic `message_stop`, Gemini a `finishReason`, ...).
    `error`: the first error event (type and code only, never its message).
    `answering`: an event other than a stream-opening preamble has arrived (the first token,
    an error or the end): what the first-token deadline waits for.
    """

    __slots__ = (
        "_data",
        "_done_completes",
        "_event",
        "_framed",
        "_gate",
        "_partial",
        "_pending",
        "_preamble",
        "_text",
        "answering",
        "completed",
        "drop_malformed",
        "error",
        "events",
        "malformed",
        "strip_usage_only",
        "stripped",
        "text_chars",
        "usage",
        "wire",
    )

    def __init__(
        self, wire: Wire | str, *, drop_malformed: bool = False, strip_usage_only: bool = False
    ) -> None:
        """`wire`: the endpoint's wire, or its name (ValueError for an unknown one)."""
        self.wire = _wire(wire)
        self.drop_malformed = drop_malformed
        self.strip_usage_only = strip_usage_only
        self._framed = drop_malformed or strip_usage_only
        """Whole events out (held to their blank line), some dropped."""
        self.stripped = 0
        """Usage-only events left out (`strip_usage_only`)."""
        self.text_chars = 0
        self._text = self.wire.text_chars if self.wire.counts_text else None
        self._pending: list[bytes] = []
        """drop_malformed: the lines of the event not yet ended."""
        self.usage = Usage()
        self.error: StreamError | None = None
        self.completed = False
        self.answering = False
        self.malformed = 0
        self.events = 0
        self._gate = self.wire.gate.search
        self._preamble = self.wire.preamble_events
        self._done_completes = self.wire.done_completes
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
            return b"" if self._framed else chunk
        if self._partial:
            self._partial.append(chunk[:end])
            block = b"".join(self._partial)
            self._partial.clear()
        else:
            block = chunk[:end]
        if end + 1 < len(chunk):
            self._partial.append(chunk[end + 1 :])
        if self._framed:
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
        """The line loop of `feed` for whole events: malformed (`drop_malformed`) and
        usage-only (`strip_usage_only`) ones dropped."""
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
        return b"\n".join(out) + b"\n" if out else b""

    def close(self) -> bytes:
        """The stream ended: account for a last line or event with no terminator; returns
        what is still to forward (with `drop_malformed`, that event unless it is malformed)."""
        rest = b"".join(self._partial)
        self._partial.clear()
        if not self._framed:
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
        if not self.answering and event not in self._preamble:
            self.answering = True
        if payload == _DONE:
            if self._done_completes:
                self.completed = True
            return True
        if not (payload.startswith(b"{") and payload.endswith(b"}")):
            self.malformed += 1
            if event == _ERROR_EVENT:
                self.record_error(None, None)
            # an error event still reaches the caller; so does any without drop_malformed
            return event == _ERROR_EVENT or not self.drop_malformed
        if event != _ERROR_EVENT and not self.drop_malformed and self._gate(payload) is None:
            self.text_chars += len(payload)  # not parsed: its whole data counts as text
            return True
        obj = _json_object(payload)
        if obj is None:
            self.malformed += 1
            return event == _ERROR_EVENT or not self.drop_malformed
        if self._text is not None:
            self.text_chars += self._text(obj)
        if event == _ERROR_EVENT or self._gate(payload) is not None:
            self._record(event, obj)
            if self.strip_usage_only and event != _ERROR_EVENT and self.wire.usage_only(obj):
                self.stripped += 1
                return False
        return True

    def _record(self, event: bytes, obj: dict[str, object]) -> None:
        if event == _ERROR_EVENT:
            self.record_error(*self.wire.error_fields(obj))
        else:
            self.wire.read_event(self, event, obj)

    def record_error(self, type_: str | None, code: str | None) -> None:
        """Keep the first error of the stream (a wire's reader calls this)."""
        if self.error is None:
            self.error = StreamError(type_, code)


def _json_object(payload: bytes) -> dict[str, object] | None:
    """The event's data read as a JSON object (None: it is not one). orjson reads every
    event (a fifth of the standard library's time: it runs for each event of each stream);
    what it refuses and the standard library reads (NaN, a lone surrogate in a string) is
    read by the latter, so no event the relay passed before is dropped as malformed now."""
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def error_event(
    wire: Wire | str, code: str, message: str, *, error_type: str = "api_error"
) -> bytes:
    """An SSE error event in the wire's own shape, so the caller's SDK raises on it.

    The gateway appends one when it must end a 200 stream early (an idle upstream, a drain).
    `message` goes to the caller: it must never carry a credential or upstream text.
    """
    return _wire(wire).error_event(code, message, error_type)


def usage_from_body(wire: Wire | str, body: bytes) -> Usage:
    """Usage of a non-streaming JSON answer; empty when the body is not a JSON object."""
    try:
        obj = orjson.loads(body)  # depth-limited in C: no RecursionError to fear
    except orjson.JSONDecodeError:
        return Usage()
    return _wire(wire).usage(obj) if isinstance(obj, dict) else Usage()
