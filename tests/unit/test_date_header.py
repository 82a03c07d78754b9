"""The default response headers the requests renew (`leasegate.web.date_header`): a current
`Date` first, the server's own headers kept, nothing added when the server sends no `Date`."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

import uvicorn
from uvicorn.server import ServerState

from leasegate.web import date_header


def _config(**options: object) -> uvicorn.Config:
    config = uvicorn.Config(lambda: None, **options)  # type: ignore[arg-type]
    config.encoded_headers = [(b"server", b"uvicorn"), (b"x-extra", b"1")]  # as `load()` sets
    return config


def test_a_renewal_puts_a_current_date_first_and_keeps_the_servers_headers() -> None:
    state = ServerState()
    date_header.renew(state, _config())
    (name, value), *rest = state.default_headers
    assert name == b"date"
    assert abs(parsedate_to_datetime(value.decode()).timestamp() - time.time()) <= 1.5
    assert rest == [(b"server", b"uvicorn"), (b"x-extra", b"1")]


def test_a_server_that_sends_no_date_is_left_as_it_is() -> None:
    state = ServerState()
    state.default_headers = [(b"server", b"uvicorn")]
    date_header.renew(state, _config(date_header=False))
    assert state.default_headers == [(b"server", b"uvicorn")]
