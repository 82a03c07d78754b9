"""Every evidence read the control plane issues stays index-backed on a partitioned table of a
million rows: the statements are captured as the repositories send them, then EXPLAINed with
their own parameters. No plan may read a daily partition sequentially, and a read bounded by
`since` must prune the partitions before it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from leasegate.db import Store, upgrade
from leasegate.db.partitions import EvidencePartitions, day_start, partition_day
from leasegate.db.pool import POOL_DEMAND
from tests.fixtures.databases import create_database, drop_database, pg_url
from tests.fixtures.services import require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DAY = date(2026, 3, 1)
ROWS = 1_000_000
DAYS = 10
SECONDS_PER_ROW = DAYS * 86_400 / ROWS

# A million rows spread evenly over DAYS days from DAY: 20 accounts, 100 000 decisions (ten
# requests each), one in seven qualifying.
_LOAD = """
INSERT INTO evidence (
  request_id, key_id, mint_decision_id, account_id, requested_model, served_model, endpoint,
  stream, upstream_status, outcome, qualifying, started_at, duration_ms, malformed_chunks
)
SELECT 'req-' || g, 'key-' || (g % 100000), 'md-' || (g % 100000), 'acct-' || (g % 20),
       'gpt-4o', 'gpt-4o', '/v1/chat/completions', false, 200, 'success', g % 7 = 0,
       CAST(:start AS timestamptz) + make_interval(secs => g * CAST(:step AS float8)), 12.5, 0
FROM generate_series(0, CAST(:rows AS int) - 1) AS g
"""

Statement = tuple[str, Any]


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(node type, relation, index or "") of every node reading a relation, depth first."""
    if "Relation Name" in plan:
        yield plan["Node Type"], plan["Relation Name"], plan.get("Index Name", "")
    for child in plan.get("Plans", []):
        yield from _scans(child)


@pytest.fixture(scope="module")
def loaded_url() -> Iterator[str]:
    require_postgres()
    name = asyncio.run(create_database())
    url = pg_url(name)
    try:
        upgrade(url)
        asyncio.run(_load(url))
        yield url
    finally:
        asyncio.run(drop_database(name))


async def _load(url: str) -> None:
    store = Store.connect(url)
    try:
        await EvidencePartitions(store.db).ensure(DAY + timedelta(days=1), ahead=DAYS - 2)
        async with store.db.session() as session:
            load = {"start": day_start(DAY), "step": SECONDS_PER_ROW, "rows": ROWS}
            await session.execute(text(_LOAD), load)
        async with store.db.engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.exec_driver_sql("ANALYZE evidence")
    finally:
        await store.close()


async def _captured(store: Store, read: Callable[[], Awaitable[object]]) -> list[Statement]:
    statements: list[Statement] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, parameters))

    event.listen(store.db.engine.sync_engine, "before_cursor_execute", capture)
    try:
        await read()
    finally:
        event.remove(store.db.engine.sync_engine, "before_cursor_execute", capture)
    assert statements, "the read issued no SELECT"
    return statements


async def _plan(store: Store, statement: Statement) -> dict[str, Any]:
    sql, parameters = statement
    async with store.db.engine.connect() as connection:
        result = await connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}", parameters)
        raw = result.scalar_one()
    document = json.loads(raw) if isinstance(raw, str) else raw
    plan: dict[str, Any] = document[0]["Plan"]
    return plan


LATE = day_start(DAY + timedelta(days=DAYS - 1, hours=12))

READS: dict[str, Callable[[Store], Awaitable[object]]] = {
    "evidence, newest": lambda s: s.query_evidence(),
    "evidence by decision": lambda s: s.query_evidence(decision_id="md-4242"),
    "evidence by account": lambda s: s.query_evidence(account_id="acct-7"),
    "evidence since": lambda s: s.query_evidence(since=LATE),
    "evidence by account since": lambda s: s.query_evidence(account_id="acct-7", since=LATE),
    "evidence by decision and account": lambda s: s.query_evidence(
        decision_id="md-4242", account_id="acct-2"
    ),
    "evidence by decision since": lambda s: s.query_evidence(decision_id="md-4242", since=LATE),
    "by decision, account and since, largest page": lambda s: s.query_evidence(
        decision_id="md-4242", account_id="acct-2", since=LATE, limit=1000
    ),
    "a decision's evidence": lambda s: s.evidence_for_decisions(["md-4242"]),
    "a page of decisions' evidence": lambda s: s.evidence_for_decisions(
        [f"md-{i}" for i in range(0, 100_000, 1000)]
    ),
    "the hop check's evidence summary": lambda s: s.evidence_summary("md-4242"),
}


def _expected_index(read: str) -> str:
    """A decision's reads must use its index (ten rows among a million); the others walk an
    index in time order: `started_at`'s or `(account_id, started_at)`'s, as the planner
    prefers for the account's share of rows (partition indexes are named after columns)."""
    if "decision" in read or "hop" in read:
        return "mint_decision_id"
    return "started_at"


@pytest.mark.parametrize("read", READS)
async def test_every_evidence_read_is_index_backed(loaded_url: str, read: str) -> None:
    store = Store.connect(loaded_url)
    try:
        for statement in await _captured(store, lambda: READS[read](store)):
            scans = list(_scans(await _plan(store, statement)))
            days = [(kind, index) for kind, name, index in scans if partition_day(name)]
            assert days, f"{read}: no daily partition read at all: {scans}"
            assert all(kind != "Seq Scan" for kind, _ in days), f"{read}: {scans}"
            assert all(_expected_index(read) in index for _, index in days), f"{read}: {scans}"
            if "since" in read:
                assert len(days) <= 2, f"{read}: earlier days not pruned: {scans}"
    finally:
        await store.close()


async def test_the_fair_share_read_of_what_tenants_spent_prunes_to_its_window(
    loaded_url: str,
) -> None:
    """The pool-demand statement (asyncpg, prepared: not captured above) reads the evidence of
    the last seconds only: by the `started_at` index, never a daily partition sequentially,
    and no day but the window's."""
    store = Store.connect(loaded_url)
    try:
        now = LATE + timedelta(hours=1)
        args = (["acct-1", "acct-2"], "gpt-4o", now - timedelta(seconds=3), now)
        async with store.db.pg.connection() as connection:
            raw = await connection.fetchval(
                f"EXPLAIN (FORMAT JSON) {POOL_DEMAND}", *args, now - timedelta(seconds=10)
            )
        document = json.loads(raw) if isinstance(raw, str) else raw
        scans = list(_scans(document[0]["Plan"]))
        days = [(kind, index) for kind, name, index in scans if partition_day(name)]
        assert len(days) == 1, f"not the window's day alone: {scans}"
        assert all(kind != "Seq Scan" for kind, _ in days), scans
        assert all("started_at" in index for _, index in days), scans
    finally:
        await store.close()


async def test_the_table_holds_a_million_rows_by_day(loaded_url: str) -> None:
    store = Store.connect(loaded_url)
    try:
        async with store.db.session() as session:
            per_day: dict[str, int] = dict(
                (
                    await session.execute(
                        text("SELECT tableoid::regclass::text, count(*) FROM evidence GROUP BY 1")
                    )
                ).all()
            )
        assert sum(per_day.values()) == ROWS
        assert len(per_day) == DAYS, "every row in its day's partition, none in the default"
    finally:
        await store.close()
