"""A deadline and a size cap for reading a request's headers, which uvicorn does not have.

uvicorn closes a keep-alive connection that stays idle between requests, but a connection
that sends nothing at all, or trickles a header line every few seconds (slowloris), is held
for as long as the client likes. `header_deadline_protocol(seconds)` is uvicorn's httptools
protocol with one timer more: armed when a connection opens and when a request's first byte
arrives, cleared when its headers are complete. When it fires:

- a partial request is answered `408 request-timeout` (the error envelope) and the
  connection closed, unless a response is still being written on it (a pipelined request):
  then that response finishes and the connection closes after it;
- a connection that sent nothing is closed.

The bytes a connection may send while a request's headers are incomplete are capped too
(`max_header_bytes`): past it, `431 request-header-too-large` and the connection is closed,
so no client can make the server buffer an unbounded header block.

Body reads have their own idle deadline (`body_limit.py`), where a response can still be
sent by the application.

Being the protocol of every server the gateway runs, it also renews the responses' `Date`
header as each request begins (`date_header.py`), in place of uvicorn's ticking loop.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from leasegate.core.errors import GatewayError
from leasegate.web import date_header


def _raw_refusal(error: GatewayError, reason: bytes) -> bytes:
    body = json.dumps(error.envelope()).encode()
    head = (
        b"HTTP/1.1 " + str(error.status).encode() + b" " + reason + b"\r\n"
        b"content-type: application/json\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


_TIMEOUT_RESPONSE = _raw_refusal(
    GatewayError("request-timeout", "the request headers did not arrive within the deadline"),
    b"Request Timeout",
)
_TOO_LARGE_RESPONSE = _raw_refusal(
    GatewayError("request-header-too-large", "the request headers are too large"),
    b"Request Header Fields Too Large",
)


_LINGER_S = 2.0


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0
    max_header_bytes: int = 65536

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_started = False
        self._in_headers = True
        self._header_bytes = 0
        self._discarding = False

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        if self._in_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        # Counted only while headers stay incomplete after this chunk: the chunk that
        # completes them may carry body bytes too, and those are not headers.
        if self._in_headers and self._header_bytes > self.max_header_bytes:
            self._refuse(_TOO_LARGE_RESPONSE)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        date_header.renew(self.server_state, self.config)
        super().on_message_begin()
        self._request_started = True
        self._in_headers = True
        self._header_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._request_started = False
        self._in_headers = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True  # whatever comes next is the next request's head
        self._header_bytes = 0

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._request_started:
            self._refuse(_TIMEOUT_RESPONSE)
        elif self.cycle is None or self.cycle.response_complete:
            self.transport.close()

    def _refuse(self, response: bytes) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        self._discarding = True  # nothing more of this connection is parsed
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False  # the response in progress ends the connection
            return
        self.transport.write(response)
        # Lingering close: end our side, then read and discard what the client is still
        # sending for a moment. Closing at once with unread input would reset the connection,
        # and the client could lose the answer before reading it.
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER_S, self.transport.close)


def header_deadline_protocol(
    header_timeout_s: float, max_header_bytes: int = 65536
) -> type[HeaderDeadlineProtocol]:
    """uvicorn's `http=` argument: the httptools protocol with this header deadline and cap."""
    return type(
        "HeaderDeadlineProtocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes},
    )
