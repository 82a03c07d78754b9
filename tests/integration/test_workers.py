"""`leasegate proxy --workers 2`: two processes serve one port, and a SIGTERM stops both
cleanly (exit 0)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import account_entry, gateway_env
from tests.fixtures.processes import leasegate_process
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv, production_stores

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


def _one_account(tmp_path: Path, stores: StoresEnv, upstream: MockUpstream) -> dict[str, str]:
    return gateway_env(
        tmp_path, [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})], **stores
    )


def _serving_pids(log_path: Path) -> set[int]:
    """The pids that wrote an access line: the processes that answered a request."""
    pids = set()
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("logger") == "leasegate.access" and record.get("path") == "/healthz":
            pids.add(int(record["pid"]))
    return pids


async def test_two_workers_share_one_port(tmp_path: Path) -> None:
    log_path = tmp_path / "proxy.log"
    async with production_stores() as stores, MockUpstream() as upstream:
        env = _one_account(tmp_path, stores, upstream)
        with (
            log_path.open("wb") as log,
            leasegate_process("proxy", env, args=["--workers", "2"], log=log) as (url, process),
        ):
            pids: set[int] = set()
            deadline = time.monotonic() + 60
            while len(pids) < 2 and time.monotonic() < deadline:
                # a fresh connection per request: the kernel hands each to whichever
                # worker is waiting in accept()
                async def one() -> None:
                    async with local_client(timeout=5) as client:
                        assert (await client.get(f"{url}/healthz")).status_code == 200

                await asyncio.gather(*(one() for _ in range(16)))
                await asyncio.sleep(0.2)  # let the lines reach the log
                pids = _serving_pids(log_path)
            assert len(pids) == 2, f"requests were served by {pids}"
            assert process.pid not in pids  # the parent only supervises
        assert process.returncode == 0


def _workers(supervisor: int) -> set[int]:
    """The supervisor's serving children (uvicorn spawns them; a resource tracker is not one)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if parent == supervisor and b"multiprocessing.spawn" in command:
            found.add(int(entry.name))
    return found


async def test_a_worker_killed_outright_is_replaced_while_the_other_serves(
    tmp_path: Path,
) -> None:
    async with production_stores() as stores, MockUpstream() as upstream:
        env = _one_account(tmp_path, stores, upstream)
        with leasegate_process("proxy", env, args=["--workers", "2"]) as (url, process):
            first = _workers(process.pid)
            assert len(first) == 2
            victim = min(first)
            os.kill(victim, signal.SIGKILL)
            replaced: set[int] = set()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                # the port answers throughout (a fresh connection each time: the other
                # worker accepts meanwhile)
                async with local_client(timeout=5) as client:
                    assert (await client.get(f"{url}/healthz")).status_code == 200
                replaced = _workers(process.pid) - first
                if replaced:
                    break
                await asyncio.sleep(0.2)
            assert replaced, "the killed worker was not replaced"
            assert victim not in _workers(process.pid)
        assert process.returncode == 0
