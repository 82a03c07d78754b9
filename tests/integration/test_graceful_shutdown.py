"""SIGTERM drains: an in-flight stream is finished or cut within the drain time; a cut stream
ends with an error event in the provider's shape (`gateway-shutdown`), its row says so (not
qualifying, not a health failure), its request slot is given back, and the row is flushed
before the process exits."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from redis.asyncio import Redis

from leasegate.db import Store
from leasegate.demo.upstream import MockUpstream, Reply
from leasegate.kv.keys import circuit_key, pair_key, slots_key
from tests.fixtures.gateways import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import start_processes
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv

pytestmark = [pytest.mark.slow, pytest.mark.serial]


async def test_sigterm_cuts_a_stream_within_the_drain_and_flushes_its_row(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    slow = Reply(chunk_delay_s=0.5)  # 20 chunks: ~10 s, far longer than the drain
    async with MockUpstream(script=lambda _: slow) as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"}, request_capacity=5)],
            **stores_env,
            extra={"LEASEGATE_SHUTDOWN_DRAIN_S": "1"},
        )
        received = b""
        with ExitStack() as stack:
            ((url, process),) = await start_processes(stack, env, ["dev"])
            async with local_client(timeout=30) as client:
                minted = (
                    await client.post(
                        f"{url}/control/v2/keys",
                        json={"tenant": "t", "dispatch_id": "d", "model": "gpt-4o"},
                        headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
                    )
                ).json()
                async with client.stream(
                    "POST",
                    f"{url}/v1/chat/completions",
                    json={"model": "gpt-4o", "stream": True, "messages": []},
                    headers={"Authorization": f"Bearer {minted['key']}"},
                ) as response:
                    chunks = response.aiter_raw()
                    received += await anext(chunks)
                    # the key names are right: the stream's slot is counted while it runs
                    assert await _slots_held(stores_env) in (None, 1)
                    process.send_signal(signal.SIGTERM)
                    sent = time.monotonic()
                    async for chunk in chunks:  # ended by the gateway, in the provider's shape
                        received += chunk
            await asyncio.to_thread(process.wait, 15)
            assert time.monotonic() - sent < 8

    last = received.strip().split(b"\n\n")[-1]
    assert last.startswith(b"data: ")
    assert json.loads(last[len(b"data: ") :])["error"]["code"] == "gateway-shutdown"
    assert b"[DONE]" not in received  # cut: 10 s of answer > 1 s of drain

    store = Store.connect(env["LEASEGATE_DATABASE_URL"])
    try:
        rows = await store.query_evidence(decision_id=minted["mint_decision_id"])
    finally:
        await store.close()
    assert len(rows) == 1
    assert rows[0].stream is True
    assert (rows[0].outcome, rows[0].qualifying, rows[0].scope) == ("gateway-shutdown", False, None)
    if "redis_url" in stores_env:
        assert await _slots_held(stores_env) == 0  # the request slot was given back
        prefix = stores_env["redis_prefix"]
        redis = Redis.from_url(stores_env["redis_url"])
        try:
            health = await redis.exists(
                circuit_key(prefix, "openai-main"), pair_key(prefix, "openai-main", "gpt-4o")
            )
        finally:
            await redis.aclose()
        assert health == 0  # not a health failure


async def _slots_held(stores_env: StoresEnv) -> int | None:
    """The account's request slots in Redis; None in embedded mode (nothing to read)."""
    if "redis_url" not in stores_env:
        return None
    redis = Redis.from_url(stores_env["redis_url"])
    try:
        return int(await redis.zcard(slots_key(stores_env["redis_prefix"], "openai-main")))
    finally:
        await redis.aclose()
