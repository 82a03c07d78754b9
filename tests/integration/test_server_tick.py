"""The servers' own loop (`leasegate.web.serve`), on a real loopback socket in this process: it
does not tick, idle or serving; every answer's `Date` header is current however long the
server or the connection was idle (the requests renew it: `leasegate.web.date_header`); and it
stops at once on a stop signal however long it has been idle."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime

import httpx
from starlette.types import Receive, Scope, Send

from leasegate.config import load_config
from leasegate.web.serve import server
from tests.fixtures.servers import free_port, local_client, started

IDLE_S = 2.5


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


@asynccontextmanager
async def _serving() -> AsyncIterator[tuple[str, list[float]]]:
    """The gateway's server on a free port; yields its URL and the times it ticked."""
    port = free_port()
    served = server(_hello, load_config({}), "127.0.0.1", port)
    ticks: list[float] = []
    on_tick = served.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(time.monotonic())
        return await on_tick(counter)

    served.on_tick = counted  # type: ignore[method-assign]
    task = await started(served)
    try:
        yield f"http://127.0.0.1:{port}", ticks
    finally:
        served.should_exit = True
        served.handle_exit(signal.SIGTERM, None)
        await asyncio.wait_for(task, 10)


def _dated(answer: httpx.Response) -> float:
    assert answer.status_code == 200
    return parsedate_to_datetime(answer.headers["date"]).timestamp()


async def test_an_idle_server_does_not_tick_and_a_first_request_gets_a_current_date() -> None:
    async with _serving() as (url, ticks):
        await asyncio.sleep(IDLE_S)
        assert len(ticks) <= 1, "ticked while idle"
        async with local_client() as client:
            answer = await client.get(url)
        assert abs(_dated(answer) - time.time()) <= 1.5, "a Date from before the idle spell"


async def test_a_request_on_a_connection_kept_open_gets_a_current_date_without_a_tick() -> None:
    async with _serving() as (url, ticks), local_client() as client:
        first = _dated(await client.get(url))
        await asyncio.sleep(IDLE_S)  # the connection stays open, the server idle
        second = _dated(await client.get(url))
        assert second - first >= 2, "the Date of the connection's first answer, repeated"
        assert abs(second - time.time()) <= 1.5
        assert len(ticks) <= 1


async def test_a_stop_signal_ends_an_idle_server_at_once() -> None:
    port = free_port()
    served = server(_hello, load_config({}), "127.0.0.1", port)
    task = await started(served)
    await asyncio.sleep(IDLE_S)  # idle: its loop waits on nothing but a wake-up
    signalled = time.monotonic()
    served.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - signalled < 0.5
