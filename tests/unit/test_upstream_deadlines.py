"""Upstream deadlines: per-account values over the LEASEGATE_* defaults, and the body reader's
first-token and idle deadlines against a scripted chunk source."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import Account
from leasegate.config import Settings
from leasegate.upstream.deadlines import BodyReader, Deadlines, UpstreamStalled, deadlines_for
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


async def _chunks(delays: Sequence[float]) -> AsyncIterator[bytes]:
    for i, delay in enumerate(delays):
        await asyncio.sleep(delay)
        yield b"chunk %d" % i


async def test_idle_bounds_each_wait_not_the_whole_body() -> None:
    reader = BodyReader(_chunks([0.05] * 6), Deadlines(1.0, None, 0.5))
    assert len(await _read_all(reader)) == 6


async def test_a_long_gap_is_an_idle_stall() -> None:
    reader = BodyReader(_chunks([0, 1.0]), Deadlines(1.0, None, 0.1))
    assert await reader.next() == b"chunk 0"
    with pytest.raises(UpstreamStalled) as stalled:
        await reader.next()
    assert (stalled.value.phase, stalled.value.seconds) == ("idle", 0.1)


async def test_chunks_without_an_answer_do_not_push_back_the_first_token_deadline() -> None:
    # Each gap (0.1 s) is well inside the idle deadline; together they pass the first-token one.
    reader = BodyReader(_chunks([0.1] * 10), Deadlines(1.0, 0.35, 5.0))
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
