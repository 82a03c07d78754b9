"""A deadline for reading a request's headers, which uvicorn does not have.

uvicorn closes a keep-alive connection that stays idle between requests, but a connection
that sends nothing at all, or trickles a header line every few seconds (slowloris), is held
for as long as the client likes. `header_deadline_protocol(seconds)` is uvicorn's httptools
protocol with one timer more: armed when a connection opens and when a request's first byte
arrives, cleared when its headers are complete. When it fires:

- a partial request is answered `408 request-timeout` (the error envelope) and the
  connection closed, unless a response is still being written on it (a pipelined request):
  then that response finishes and the connection closes after it;
- a connection that sent nothing is closed.

Body reads have their own idle deadline (`body_limit.py`), where a response can still be
sent by the application.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from leasegate.core.errors import GatewayError


def _timeout_response() -> bytes:
    error = GatewayError(
        "request-timeout", "the request headers did not arrive within the header deadline"
    )
    body = json.dumps(error.envelope()).encode()
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


_TIMEOUT_RESPONSE = _timeout_response()


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_started = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_started = True
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._request_started = False
        super().on_headers_complete()

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
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False  # the response in progress ends the connection
            return
        if self._request_started:
            self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """uvicorn's `http=` argument: the httptools protocol with this header deadline."""
    return type(
        "HeaderDeadlineProtocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout_s": header_timeout_s},
    )
