"""SIGTERM drains: an in-flight stream is finished or cut within the drain time; a cut stream
ends with an error event in the provider's shape (`gateway-shutdown`), its row says so (not
qualifying, not a health failure), its request slot is given back, and the row is flushed
before the process exits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from leasegate.db import Store
from leasegate.demo.upstream import MockUpstream, Reply
from tests.fixtures.gateway import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.servers import free_port, local_client
from tests.fixtures.services import StoresEnv, production_stores

pytestmark = pytest.mark.slow


async def _wait_ready(url: str, process: asyncio.subprocess.Process) -> None:
    async with local_client(timeout=1) as client:
        for _ in range(300):
            assert process.returncode is None, "leasegate dev exited early"
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("leasegate dev did not become ready")


@pytest.fixture(params=["embedded", "production"])
async def stores_env(request: pytest.FixtureRequest) -> AsyncIterator[StoresEnv]:
    if request.param == "embedded":
        yield {}
        return
    async with production_stores() as stores:
        yield stores


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
        port = free_port()
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "leasegate.cli.main",
            "dev",
            "--port",
            str(port),
            env={**full_env, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        received = b""
        try:
            await _wait_ready(url, process)
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
                    process.send_signal(signal.SIGTERM)
                    sent = time.monotonic()
                    async for chunk in chunks:  # ended by the gateway, in the provider's shape
                        received += chunk
            await asyncio.wait_for(process.wait(), timeout=15)
            assert time.monotonic() - sent < 8
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

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
        redis = Redis.from_url(stores_env["redis_url"])
        try:
            slots = await redis.zcard(f"{stores_env['redis_prefix']}:slots:openai-main")
            health = await redis.keys(f"{stores_env['redis_prefix']}:health:*")
        finally:
            await redis.aclose()
        assert slots == 0  # the request slot was given back
        assert health == []  # not a health failure
