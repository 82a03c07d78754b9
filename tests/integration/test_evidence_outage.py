"""Evidence through a Postgres outage, with real processes: a proxy with a tiny memory bound
keeps serving the keys it knows while the database refuses every connection, spills its rows
to disk, is restarted in the middle of the outage (its successor adopts the spill), and once
the database is back every request's row is present exactly once."""

from __future__ import annotations

import asyncio
import secrets
import signal
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.databases import PG_HOST, PG_PORT, create_database, drop_database, pg_url
from tests.fixtures.gateways import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import LeasegateProcess, start_processes
from tests.fixtures.servers import local_client
from tests.fixtures.services import (
    REDIS_URL,
    delete_prefix,
    require_postgres,
    require_redis,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres]


async def _admin(statement: str) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database="postgres")
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def database_down(name: str) -> None:
    """Every connection refused (new ones) or terminated (open ones): Postgres is gone."""
    await _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database="postgres")
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
    finally:
        await conn.close()


async def database_up(name: str) -> None:
    await _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


async def _proxy_up(stack: ExitStack, env: dict[str, str]) -> list[LeasegateProcess]:
    """A proxy that is up (`/healthz`), ready or not: its database may be down."""
    return await start_processes(stack, env, ["proxy"], wait_for="/healthz")


async def _steady(client: httpx.AsyncClient, proxy: str, keys: list[str], count: int) -> list[str]:
    """`count` requests, paced, round robin over the keys; the request id of each."""
    ids = []
    for i in range(count):
        response = await client.post(
            f"{proxy}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {keys[i % len(keys)]}"},
        )
        ids.append(response.headers["x-leasegate-request-id"])
        await asyncio.sleep(0.01)
    return ids


async def _rows(name: str) -> list[str]:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=name)
    try:
        return [r["request_id"] for r in await conn.fetch("SELECT request_id FROM evidence")]
    finally:
        await conn.close()


@asynccontextmanager
async def _stack(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, str]]]:
    require_postgres()
    require_redis()
    name = await create_database(migrated=True)
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        async with MockUpstream() as upstream:
            env = gateway_env(
                tmp_path,
                [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
                database_url=pg_url(name),
                redis_url=REDIS_URL,
                redis_prefix=prefix,
                extra={
                    "LEASEGATE_EVIDENCE_MEMORY_ROWS": "5",
                    "LEASEGATE_EVIDENCE_SPILL_PATH": str(tmp_path / "spill"),
                    "LEASEGATE_EVIDENCE_DURABLE_TIMEOUT_S": "0.5",
                    "LEASEGATE_SHUTDOWN_DRAIN_S": "1",
                },
            )
            yield name, env
    finally:
        await database_up(name)
        await drop_database(name)
        await delete_prefix(prefix)


async def test_every_row_of_an_outage_lands_once_across_a_restart(tmp_path: Path) -> None:
    async with _stack(tmp_path) as (name, env):
        with ExitStack() as stack:
            ((control, _),) = await start_processes(stack, env, ["control-plane"])
            async with local_client(timeout=30) as client:
                keys = []
                for i in range(3):
                    minted = await client.post(
                        f"{control}/control/v2/keys",
                        json={"tenant": "t", "dispatch_id": f"d-{i}", "model": "gpt-4o"},
                        headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
                    )
                    keys.append(minted.json()["key"])
                sent: list[str] = []
                with ExitStack() as proxy:
                    ((first, process),) = await _proxy_up(proxy, env)
                    sent += await _steady(client, first, keys, 10)  # keys now cached

                    await database_down(name)
                    during = await _steady(client, first, keys, 60)
                    sent += during
                    spilled = await asyncio.to_thread(_spilled_lines, tmp_path / "spill")
                    assert spilled > 0  # past 5 rows in memory, the rest went to disk
                    process.send_signal(signal.SIGTERM)
                    await asyncio.to_thread(process.wait, 20)

                # a successor starts while the database is still down and adopts the spill
                with ExitStack() as proxy:
                    ((second, _),) = await _proxy_up(proxy, env)
                    sent += await _steady(client, second, keys, 30)
                    await database_up(name)
                    for _ in range(600):  # the writer backs off up to 5 s between tries
                        if len(await _rows(name)) >= len(sent):
                            break
                        await asyncio.sleep(0.1)
                    await asyncio.sleep(0.5)  # nothing more (no duplicate) arrives late
                    written = await _rows(name)

    assert sorted(written) == sorted(sent), (len(written), len(set(written) - set(sent)))
    assert len(set(sent)) == len(sent) == 100
    assert await asyncio.to_thread(_spilled_lines, tmp_path / "spill") == 0


def _spilled_lines(root: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in root.rglob("*.jsonl"))
