"""A control plane whose pooled Postgres connections were all terminated by the server (what a
Postgres restart or a failover does to them) answers every following call as if nothing had
happened: no 503 while Postgres is up (issue 22 item 6). Both pools are exercised: the
asyncpg `PgPool` (the mint's commit, key and decision reads) and SQLAlchemy's engine (the
audit chain read by every mint, the accounts view, `/readyz`'s ping)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from leasegate.audit.reads import ChainHead
from leasegate.db.audit import AuditRepository
from leasegate.db.engine import Database
from leasegate.demo.upstream import MockUpstream
from leasegate.pg.pool import Deadlines, PgPool
from leasegate.pg.url import connect_kwargs
from tests.fixtures.databases import PG_HOST, PG_PORT, PG_USER
from tests.fixtures.gateways import (
    CONTROL_TOKEN,
    account_entry,
    gateway_env,
    in_process_control_plane,
)
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

ROUNDS = 3
CALLS_PER_ROUND = 12


async def _terminate_backends(database: str) -> int:
    """What a restart does to every connection of `database`: the server ends them."""
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        ended = await admin.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()
    return int(ended)


async def _calls(client: httpx.AsyncClient, url: str, tag: str) -> list[httpx.Response]:
    """Mints (each then read back) and the other reads, one after another."""
    auth = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
    answers = []
    for n in range(CALLS_PER_ROUND):
        minted = await client.post(
            f"{url}/control/v2/keys",
            json={"tenant": "t", "dispatch_id": f"d-{tag}-{n}", "model": "gpt-4o"},
            headers=auth,
        )
        answers.append(minted)
        if minted.status_code == 201:
            body = minted.json()
            key_url = f"{url}/control/v2/keys/{body['key_id']}"
            answers.append(await client.get(key_url, headers=auth))
            answers.append(
                await client.get(
                    f"{url}/control/v2/decisions/{body['mint_decision_id']}", headers=auth
                )
            )
        answers.append(await client.get(f"{url}/control/v2/accounts", headers=auth))
        answers.append(await client.get(f"{url}/readyz"))
    return answers


async def test_terminated_pooled_connections_cost_no_503(tmp_path: Path) -> None:
    async with production_stores() as stores, MockUpstream() as upstream:
        account = account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})
        env = gateway_env(tmp_path, [account], **stores)
        database = stores["database_url"].rsplit("/", 1)[1]
        async with in_process_control_plane(env) as url, local_client(timeout=30) as client:
            warm = await _calls(client, url, "warm")  # both pools hold open connections
            assert {a.status_code for a in warm} <= {200, 201}, [a.text for a in warm][:3]
            failed: list[str] = []
            for round_ in range(ROUNDS):
                assert await _terminate_backends(database) > 0
                for answer in await _calls(client, url, f"r{round_}"):
                    if answer.status_code not in (200, 201):
                        failed.append(f"{answer.request.url.path} {answer.status_code}")
            assert failed == [], failed


async def test_a_mint_whose_backend_the_server_ends_mid_statement_is_minted_once(
    tmp_path: Path,
) -> None:
    """The server ends the backend while the mint's statement is running (it waits on the
    account's lease row, held by another transaction): the mint did not commit, so it runs
    once more on a fresh connection and the caller gets its key, not a 503. One live key."""
    async with production_stores() as stores, MockUpstream() as upstream:
        account = account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"}, lease_capacity=5)
        env = gateway_env(tmp_path, [account], **stores)
        database = stores["database_url"].rsplit("/", 1)[1]
        auth = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
        body = {"tenant": "t", "dispatch_id": "d-held", "model": "gpt-4o"}
        async with in_process_control_plane(env) as url, local_client(timeout=30) as client:
            warm = await client.post(
                f"{url}/control/v2/keys", json={**body, "dispatch_id": "d-warm"}, headers=auth
            )
            assert warm.status_code == 201, warm.text
            locker = await asyncpg.connect(
                host=PG_HOST, port=PG_PORT, user=PG_USER, database=database
            )
            try:
                holding = locker.transaction()
                await holding.start()
                await locker.execute(
                    "SELECT 1 FROM account_leases WHERE account_id = 'openai-main' FOR UPDATE"
                )
                mint = asyncio.create_task(
                    client.post(f"{url}/control/v2/keys", json=body, headers=auth)
                )
                waiting = None
                for _ in range(200):  # the mint's backend queues on the row lock
                    waiting = await locker.fetchval(
                        "SELECT pid FROM pg_stat_activity WHERE datname = $1 "
                        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                        database,
                    )
                    if waiting is not None:
                        break
                    await asyncio.sleep(0.02)
                assert waiting is not None, "the mint never reached the row lock"
                await locker.execute("SELECT pg_terminate_backend($1)", waiting)
                await asyncio.sleep(0.2)
                await holding.rollback()
                answer = await mint
                live = await locker.fetchval(
                    "SELECT count(*) FROM keys WHERE live_dispatch IS NOT NULL "
                    "AND account_id = 'openai-main' AND key_id = $1",
                    answer.json().get("key_id", ""),
                )
            finally:
                await locker.close()
            assert answer.status_code == 201, answer.text
            assert live == 1


async def test_a_read_whose_connection_dies_mid_call_is_read_again(
    fresh_pg_database: str,
) -> None:
    """`PgPool.read`: the first connection's backend is ended by the server between the
    moment it is lent and its statement; the read answers from a fresh connection."""
    pool = PgPool(connect_kwargs(fresh_pg_database), size=2, connect_s=3.0, command_s=5.0)
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    runs: list[int] = []

    async def read(connection: asyncpg.Connection) -> int:
        runs.append(connection.get_server_pid())
        if len(runs) == 1:
            await admin.execute("SELECT pg_terminate_backend($1)", runs[0])
        value: int = await connection.fetchval("SELECT 7")
        return value

    try:
        assert await pool.read(read) == 7
    finally:
        await admin.close()
        await pool.close()
    assert len(runs) == 2
    assert runs[0] != runs[1]


async def test_an_engine_read_whose_backend_the_server_ends_is_read_again(
    migrated_pg_database: str,
) -> None:
    """SQLAlchemy's path: the audit chain's read (every mint reads the chain's state) waits on
    a lock, the server ends its backend; it answers from a fresh connection, no 503."""
    db = Database.connect(migrated_pg_database, Deadlines(connect_s=3.0, command_s=10.0))
    database = migrated_pg_database.rsplit("/", 1)[1]
    locker = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
    read: asyncio.Task[ChainHead] | None = None
    try:
        holding = locker.transaction()
        await holding.start()
        await locker.execute("LOCK TABLE audit_records IN ACCESS EXCLUSIVE MODE")
        read = asyncio.create_task(AuditRepository(db).read_head())
        waiting = await _waiting_backend(locker, database)  # the read queued on the lock
        assert not read.done(), read.exception()
        await locker.execute("SELECT pg_terminate_backend($1)", waiting)
        await asyncio.sleep(0.2)
        await holding.rollback()
        head = await read
    finally:
        if read is not None and not read.done():  # a failed test leaves no connection behind
            read.cancel()
            await asyncio.gather(read, return_exceptions=True)
        await locker.close()
        await db.dispose()
    assert head.count == 0


async def _waiting_backend(locker: asyncpg.Connection, database: str) -> int:
    """The backend of `database` queued on a lock `locker` holds (polled: on a busy machine the
    reader's first connection alone can take seconds)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        # `locker` is inside its transaction, which would otherwise read one frozen snapshot
        await locker.execute("SELECT pg_stat_clear_snapshot()")
        pid = await locker.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            database,
        )
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.02)
    rows = await locker.fetch(
        "SELECT pid, state, wait_event_type, wait_event, query FROM pg_stat_activity "
        "WHERE datname = $1",
        database,
    )
    raise AssertionError(f"no backend ever waited on the lock: {rows}")
