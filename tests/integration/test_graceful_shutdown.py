"""SIGTERM drains: an in-flight stream is finished or cut within the drain time, and its
evidence row is flushed before the process exits (SPEC §6)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from leasegate.db import Store
from leasegate.demo.upstream import MockUpstream, Reply
from tests.fixtures.gateway import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.slow


async def _wait_ready(url: str, process: asyncio.subprocess.Process) -> None:
    async with httpx.AsyncClient(timeout=1) as client:
        for _ in range(300):
            assert process.returncode is None, "leasegate dev exited early"
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("leasegate dev did not become ready")


async def test_sigterm_cuts_a_stream_within_the_drain_and_flushes_its_row(tmp_path: Path) -> None:
    slow = Reply(chunk_delay_s=0.5)  # 20 chunks: ~10 s, far longer than the drain
    async with MockUpstream(script=lambda _: slow) as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
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
        try:
            await _wait_ready(url, process)
            async with httpx.AsyncClient(timeout=30) as client:
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
                    await anext(chunks)
                    process.send_signal(signal.SIGTERM)
                    sent = time.monotonic()
                    with pytest.raises(httpx.HTTPError):  # cut, not finished: 10 s > 1 s drain
                        async for _ in chunks:
                            pass
            await asyncio.wait_for(process.wait(), timeout=15)
            assert time.monotonic() - sent < 8
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    store = Store.connect(env["LEASEGATE_DATABASE_URL"])
    try:
        rows = await store.query_evidence(decision_id=minted["mint_decision_id"])
    finally:
        await store.close()
    assert len(rows) == 1
    assert rows[0].stream is True
