"""No evidence lost to a crash during a database outage, with real processes: the proxy's
Postgres is cut (its relay refuses every connection), the proxy serves 40 requests a second
from its key cache, is killed with SIGKILL, and a successor started once the database is back
writes every completed request's row from the spill file: at most one flush interval's rows
are missing, none is written twice."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from pathlib import Path

import asyncpg
import pytest

from tests.fixtures.databases import PG_HOST, PG_PORT, PG_USER
from tests.fixtures.faults import faulty_gateway
from tests.fixtures.processes import start_processes

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres]

RATE = 40.0
OUTAGE_S = 5.0
FLUSH_INTERVAL_S = 0.05


async def _evidence_ids(database: str) -> list[str]:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
    try:
        return [r["request_id"] for r in await conn.fetch("SELECT request_id FROM evidence")]
    finally:
        await conn.close()


async def test_a_proxy_killed_during_a_database_outage_loses_at_most_one_interval(
    tmp_path: Path,
) -> None:
    async with faulty_gateway(
        tmp_path, settings={"LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S": str(FLUSH_INTERVAL_S)}
    ) as gw:
        key = await gw.minted_key(model="o")
        completed: list[str] = []

        async def one() -> None:
            response = await gw.chat(key, model="o")
            if response.status_code == 200:
                completed.append(response.headers["x-leasegate-request-id"])

        for _ in range(5):  # the key is now cached
            await one()
        gw.postgres.mode = "refuse"
        started = time.monotonic()
        calls = []
        for i in range(int(RATE * OUTAGE_S)):
            await asyncio.sleep(max(0.0, started + i / RATE - time.monotonic()))
            calls.append(asyncio.create_task(one()))
        await asyncio.gather(*calls)
        gw.processes["proxy"].kill()  # SIGKILL: nothing is flushed, nothing moved to disk
        await asyncio.to_thread(gw.processes["proxy"].wait, 10)
        assert len(completed) >= RATE * OUTAGE_S * 0.9, len(completed)

        gw.postgres.mode = "pass"
        database = gw.env["LEASEGATE_DATABASE_URL"].rsplit("/", 1)[1]
        with ExitStack() as stack:
            await start_processes(stack, gw.env, ["proxy"])  # adopts the spill file
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                written = await _evidence_ids(database)
                if set(completed) <= set(written):
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)  # nothing arrives late, no duplicate either
            written = await _evidence_ids(database)

    missing = set(completed) - set(written)
    assert len(missing) <= max(1, RATE * FLUSH_INTERVAL_S), (len(missing), len(completed))
    assert len(written) == len(set(written))  # no row twice
