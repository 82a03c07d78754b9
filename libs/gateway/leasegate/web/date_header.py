"""The `Date` header of every response, renewed by the requests themselves.

uvicorn renews its default response headers (`Date`, `server`) from its server's main loop,
ten times a second, whatever the traffic. The gateway's servers (`leasegate.web.serve`) do not
tick: each request renews them as it begins (`HeaderDeadlineProtocol.on_message_begin`, the
protocol every one of them is given), making a new value only when the clock's second has
changed. An idle process is never woken for a header nobody reads, and a request's `Date` is
the second it began in.
"""

from __future__ import annotations

import time
from email.utils import formatdate

import uvicorn
from uvicorn.server import ServerState

_current: tuple[int, tuple[bytes, bytes]] = (0, (b"date", b""))
"""The second the `Date` value below was made for, and the header; one for the process."""


def date_header() -> tuple[bytes, bytes]:
    """The `Date` header for now (renewed when the second has changed)."""
    global _current
    now = time.time()
    second, header = _current
    if int(now) != second:
        header = (b"date", formatdate(now, usegmt=True).encode())
        _current = (int(now), header)
    return header


def renew(state: ServerState, config: uvicorn.Config) -> None:
    """Make the server's default response headers carry the current `Date` (when the server
    sends one at all: `date_header`); nothing to do while it does already."""
    if not config.date_header:
        return
    header = date_header()
    defaults = state.default_headers
    if not defaults or defaults[0] is not header:
        state.default_headers = [header, *config.encoded_headers]
