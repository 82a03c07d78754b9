"""Upstream deadlines: per-account values over the LEASEGATE_* defaults, and the body reader's
first-token and idle deadlines against a scripted chunk source."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import Account
from leasegate.config import Settings
from leasegate.upstream.deadlines import BodyReader, Deadlines, deadlines_for
from leasegate.upstream.errors import BodyFailed, UpstreamStalled
from leasegate.upstream.sse import StreamScanner


def _account(**timeouts: float | None) -> Account:
    return Account(
        id="acct",
        provider="openai",
        base_url="http://127.0.0.1:1",
        credential_env="LEASEGATE_CRED_ACCT",
        models={"m": "m"},
        configured=True,
        **timeouts,  # type: ignore[arg-type]
    )


def test_defaults_come_from_the_settings() -> None:
    assert deadlines_for(_account(), Settings()) == Deadlines(30.0, 120.0, 60.0)
    settings = Settings.model_validate(
        {
            "upstream_headers_timeout_s": 5,
            "first_token_timeout_s": 7,
            "stream_idle_timeout_s": 9,
        }
    )
    assert deadlines_for(_account(), settings) == Deadlines(5.0, 7.0, 9.0)


_SECONDS = st.none() | st.floats(min_value=0.01, max_value=1e4)


@given(headers=_SECONDS, first=_SECONDS, idle=_SECONDS)
def test_an_accounts_own_value_wins_field_by_field(
    headers: float | None, first: float | None, idle: float | None
) -> None:
    account = _account(
        headers_timeout_s=headers, first_token_timeout_s=first, stream_idle_timeout_s=idle
    )
    got = deadlines_for(account, Settings())
    assert got.headers_s == (30.0 if headers is None else headers)
    assert got.first_token_s == (120.0 if first is None else first)
    assert got.idle_s == (60.0 if idle is None else idle)


Chunks = Callable[[Sequence[float]], Awaitable[aiohttp.StreamReader]]


@pytest.fixture
async def chunks() -> AsyncIterator[Chunks]:
    """aiohttp's own body stream on a connected socket, fed chunk i after a pause of
    delays[i], then ended."""
    loop = asyncio.get_running_loop()
    opened: list[tuple[socket.socket, asyncio.BaseTransport]] = []
    feeders: list[asyncio.Task[None]] = []

    async def make(delays: Sequence[float]) -> aiohttp.StreamReader:
        ours, theirs = socket.socketpair()
        transport, protocol = await loop.connect_accepted_socket(lambda: BaseProtocol(loop), ours)
        opened.append((theirs, transport))
        body = aiohttp.StreamReader(protocol, 2**16, loop=loop)

        async def feed() -> None:
            for i, delay in enumerate(delays):
                await asyncio.sleep(delay)
                body.feed_data(b"chunk %d" % i)
            body.feed_eof()

        feeders.append(loop.create_task(feed()))
        return body

    yield make
    for task in feeders:
        task.cancel()
    await asyncio.gather(*feeders, return_exceptions=True)
    for theirs, transport in opened:
        transport.close()
        theirs.close()
    await asyncio.sleep(0)


async def test_buffered_chunks_are_taken_without_a_wait(chunks: Chunks) -> None:
    body = await chunks([])
    await asyncio.sleep(0)
    reader = BodyReader(body, Deadlines(1.0, None, 0.5))
    assert await reader.next() is None
    reader.close()


async def test_a_failed_connection_is_body_failed(chunks: Chunks) -> None:
    body = await chunks([0, 10])
    reader = BodyReader(body, Deadlines(1.0, None, 5.0))
    assert await reader.next() == b"chunk 0"
    body.set_exception(aiohttp.ClientPayloadError("Response payload is not completed"))
    with pytest.raises(BodyFailed):
        await reader.next()
    reader.close()


async def test_idle_bounds_each_wait_not_the_whole_body(chunks: Chunks) -> None:
    reader = BodyReader(await chunks([0.05] * 6), Deadlines(1.0, None, 0.5))
    assert len(await _read_all(reader)) == 6


async def test_a_long_gap_is_an_idle_stall(chunks: Chunks) -> None:
    reader = BodyReader(await chunks([0, 1.0]), Deadlines(1.0, None, 0.1))
    assert await reader.next() == b"chunk 0"
    with pytest.raises(UpstreamStalled) as stalled:
        await reader.next()
    assert (stalled.value.phase, stalled.value.seconds) == ("idle", 0.1)


async def test_chunks_without_an_answer_do_not_push_back_the_first_token_deadline(
    chunks: Chunks,
) -> None:
    # Each gap (0.1 s) is well inside the idle deadline; together they pass the first-token one.
    reader = BodyReader(await chunks([0.1] * 10), Deadlines(1.0, 0.35, 5.0))
    with pytest.raises(UpstreamStalled) as stalled:
        await _read_all(reader, awaiting_first_token=True)
    assert stalled.value.phase == "first-token"


def test_the_scanner_is_answering_only_after_the_preamble() -> None:
    scanner = StreamScanner("anthropic")
    for name in ("message_start", "content_block_start", "ping"):
        scanner.feed(f'event: {name}\ndata: {{"type": "{name}"}}\n\n'.encode())
        assert scanner.answering is False
    scanner.feed(b'event: content_block_delta\ndata: {"type": "content_block_delta"}\n\n')
    assert scanner.answering is True

    openai = StreamScanner("openai")
    openai.feed(b": keep-alive comment\n\n")
    assert openai.answering is False
    openai.feed(b'data: {"choices": []}\n\n')
    assert openai.answering is True


async def _read_all(reader: BodyReader, *, awaiting_first_token: bool = False) -> list[bytes]:
    chunks = []
    while (chunk := await reader.next(awaiting_first_token=awaiting_first_token)) is not None:
        chunks.append(chunk)
    return chunks
