"""`leasegate proxy --workers N`: N processes on one port, each a whole proxy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from leasegate.config import load_config
from leasegate.control_plane.app import create_control_plane_app
from leasegate.demo.upstream import MockUpstream
from tests.fixtures.deployments import shared_stores
from tests.fixtures.gateway import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.servers import leasegate_server, serve


def _workers(pid: int) -> list[int]:
    """The worker processes uvicorn spawned (not multiprocessing's resource tracker)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children:
        pids = [int(p) for p in children.read().split()]
    return [p for p in pids if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
async def test_two_workers_serve_the_one_port(tmp_path: Path) -> None:
    async with shared_stores() as stores, MockUpstream() as upstream:
        accounts = [account_entry("w-acct", upstream, {"w-model": "w-model"})]
        env = gateway_env(
            tmp_path,
            accounts,
            database_url=stores["database_url"],
            redis_url=stores["redis_url"],
            redis_prefix=stores["redis_prefix"],
        )
        async with serve(create_control_plane_app(load_config(env))) as control:
            server = leasegate_server("proxy", env, args=["--workers", "2"], ready_within_s=60)
            proxy, process = await asyncio.to_thread(server.__enter__)
            try:
                assert len(_workers(process.pid)) == 2
                async with httpx.AsyncClient(timeout=30) as client:
                    minted = await client.post(
                        f"{control}/control/v2/keys",
                        json={"tenant": "w", "dispatch_id": "w-1", "model": "w-model"},
                        headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
                    )
                    assert minted.status_code == 201, minted.text
                    key = minted.json()["key"]
                for _ in range(20):  # a fresh connection each: the kernel spreads them
                    async with httpx.AsyncClient(timeout=30) as client:
                        answer = await client.post(
                            f"{proxy}/v1/chat/completions",
                            json={"model": "w-model", "messages": []},
                            headers={"Authorization": f"Bearer {key}"},
                        )
                    assert answer.status_code == 200, answer.text
                assert upstream.count == 20
            finally:
                await asyncio.to_thread(server.__exit__, None, None, None)
            assert process.returncode is not None
