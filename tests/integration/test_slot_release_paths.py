"""A request slot comes back however the request ends (SPEC §5 invariant 2): a client that goes
away mid-stream, an upstream that cuts or resets, an upstream client that raises, and a crash
inside evidence writing. The account has `request_capacity: 1`, so the next request being
admitted (rather than 429) is the user-visible proof that the one slot came back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.core.records import EvidenceRow
from leasegate.demo.upstream import MockUpstream, Reply
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.upstream.clients import UpstreamRequest, UpstreamResponse
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv


@dataclass
class Harness:
    """The gateway, its one upstream, and the key minted for the account with one slot."""

    gateway: Gateway
    upstream: MockUpstream
    key: str

    @property
    def proxy(self) -> ProxyRuntime:
        runtime: ProxyRuntime = self.gateway.app.state.proxy
        return runtime

    def chat(self, *, stream: bool = True, client: httpx.AsyncClient | None = None) -> Any:
        return self.gateway.open_chat(self.key, stream=stream, client=client)

    async def in_flight(self) -> int | None:
        return await self.gateway.requests_in_flight("one")

    async def settles_at_zero(self) -> None:
        for _ in range(100):
            if await self.in_flight() == 0:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the request slot did not come back")

    async def next_request_is_admitted(self) -> None:
        self.upstream.script = None
        async with self.chat() as response:
            body = await response.aread()
        assert response.status_code == 200, body
        await self.settles_at_zero()


@pytest.fixture
async def harness(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Harness]:
    """In each mode (`stores_env`), a gateway whose one account has a request ceiling of 1,
    and a key minted for it."""
    async with MockUpstream() as upstream:
        account = account_entry("one", upstream, {"gpt-4o": "gpt-4o"}, request_capacity=1)
        env = gateway_env(tmp_path, [account], **stores_env)
        async with in_process_gateway(env, [upstream]) as gw:
            yield Harness(gw, upstream, await gw.minted_key())


async def test_a_client_that_goes_away_mid_stream_gives_the_slot_back(harness: Harness) -> None:
    harness.upstream.script = lambda _: Reply(chunk_delay_s=0.2)
    async with harness.chat() as response:
        assert response.status_code == 200
        chunks = response.aiter_raw()  # kept: a dropped iterator would close the stream
        await anext(chunks)
        assert await harness.in_flight() == 1
    # the client closed the connection with the stream half-way

    await harness.settles_at_zero()
    await harness.next_request_is_admitted()


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        pytest.param(Reply(cut_after=3), 200, id="cut-mid-stream"),
        pytest.param(Reply(reset=True), 502, id="reset-before-headers"),
    ],
)
async def test_an_upstream_that_fails_gives_the_slot_back(
    harness: Harness, reply: Reply, status: int
) -> None:
    harness.upstream.script = lambda _: reply
    async with harness.chat() as response:
        body = await response.aread()
    assert response.status_code == status
    if status == 200:  # the cut is reported inside the stream
        assert b"upstream-truncated" in body

    await harness.settles_at_zero()
    await harness.next_request_is_admitted()


async def test_an_upstream_client_that_raises_gives_the_slot_back(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_send(request: UpstreamRequest) -> UpstreamResponse:
        raise RuntimeError("a bug in the upstream client")

    # A connection of its own, as the server may drop it after the crash.
    async with local_client(timeout=30) as own:
        monkeypatch.setattr(harness.proxy.clients, "send", broken_send)
        async with harness.chat(client=own) as response:
            assert response.status_code == 500
    await harness.settles_at_zero()
    monkeypatch.undo()
    await harness.next_request_is_admitted()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "buffered"])
async def test_a_crash_inside_evidence_writing_gives_the_slot_back(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    def crashing_add(row: EvidenceRow) -> None:
        raise RuntimeError("the evidence buffer is broken")

    # A connection of its own: the server drops it after the crash, and it must not go back
    # to the pool that the checks below use.
    async with local_client(timeout=30) as own:
        monkeypatch.setattr(harness.proxy.evidence, "add", crashing_add)
        async with harness.chat(stream=stream, client=own) as response:
            assert response.status_code == 200
            # the crash comes after the answer was sent; how the connection ends is moot
            with contextlib.suppress(httpx.HTTPError):
                await response.aread()
    await harness.settles_at_zero()
    monkeypatch.undo()
    await harness.next_request_is_admitted()
