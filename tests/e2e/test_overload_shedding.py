"""Past `LEASEGATE_MAX_IN_FLIGHT` the proxy sheds a new request at once instead of queueing it:
503 `gateway-overloaded` with `Retry-After`, the upstream not called, a non-qualifying row,
no health effect, counted in the metrics. Real streams held open over real sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from leasegate.demo.upstream import MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway

BOUND = 4


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    # every stream takes ~1.5 s: 15 chunks 0.1 s apart
    async with MockUpstream(lambda request: Reply(chunk_delay_s=0.1), chunks=12) as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o-2024-08-06"})]
        env = gateway_env(tmp_path, accounts, extra={"LEASEGATE_MAX_IN_FLIGHT": str(BOUND)})
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway


async def test_past_the_bound_a_request_is_shed_at_once_and_served_again_after(
    gw: Gateway,
) -> None:
    upstream = gw.upstreams[0]
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-shed")
    async with AsyncExitStack() as held, httpx.AsyncClient(timeout=30) as own:
        streams = [
            await held.enter_async_context(gw.open_chat(minted["key"], client=own))
            for _ in range(BOUND)
        ]
        assert [s.status_code for s in streams] == [200] * BOUND
        called = upstream.count

        started = time.monotonic()
        shed = await gw.chat(minted["key"], stream=True)
        waited = time.monotonic() - started

        assert shed.status_code == 503, shed.text
        assert shed.json()["error"]["code"] == "gateway-overloaded"
        assert shed.headers["retry-after"] == "1"
        assert waited < 0.5  # answered at once, not after a stream ended
        assert upstream.count == called  # the upstream was not asked
        # the held streams are served to their end
        bodies = await asyncio.gather(*(s.aread() for s in streams))
        assert all(body.rstrip().endswith(b"data: [DONE]") for body in bodies)

    await asyncio.sleep(float(shed.headers["retry-after"]))  # as a caller told to wait does
    again = await gw.chat(minted["key"], stream=True)
    assert again.status_code == 200

    rows = await gw.evidence_for(minted["mint_decision_id"], BOUND + 2)
    refused = [r for r in rows if r["outcome"] == "refused"]
    assert len(refused) == 1
    assert refused[0]["refusal_reason"] == "gateway-overloaded"
    assert refused[0]["qualifying"] is False
    account = await gw.account("openai-main")
    assert account["health"] == "healthy"
    assert 'leasegate_proxy_refusals_total{code="gateway-overloaded"} 1.0' in await gw.metrics()
