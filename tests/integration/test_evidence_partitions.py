"""Evidence by day on Postgres: the migration converts a table that has rows, partitions are
created ahead (once, even by racing replicas), rows a missing day left in the default partition
move into its partition, and pruning drops whole days. SQLite keeps one table and prunes rows."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta

import asyncpg
import pytest
from alembic import command
from sqlalchemy import text

from leasegate.core.records import EvidenceRow
from leasegate.db import Database, Store, upgrade
from leasegate.db.migrate import alembic_config
from leasegate.db.partitions import EvidencePartitions, partition_name
from leasegate.pg.url import connect_kwargs
from tests.fixtures.evidence import at, database_url, evidence_row

__all__ = ["database_url"]  # the fixture, over SQLite and Postgres

DAY = date(2026, 3, 10)


async def _count(db: Database, table: str) -> int:
    async with db.session() as session:
        return int(await session.scalar(text(f"SELECT count(*) FROM {table}")) or 0)  # noqa: S608 - test's own names


@pytest.mark.postgres
async def test_the_migration_moves_existing_rows_into_daily_partitions(
    fresh_pg_database: str,
) -> None:
    url = fresh_pg_database
    await asyncio.to_thread(upgrade, url, "spend")  # the table before partitions
    rows = [
        evidence_row("r1", at(DAY, 0)),
        evidence_row("r2", at(DAY, 23)),
        evidence_row("r3", at(DAY + timedelta(1))),
    ]
    await _write_at_that_revision(url, rows)

    await asyncio.to_thread(upgrade, url)

    store = Store.connect(url)
    try:
        partitions = EvidencePartitions(store.db)
        assert await partitions.existing() == [
            "evidence_default",
            partition_name(DAY),
            partition_name(DAY + timedelta(1)),
        ]
        assert await _count(store.db, partition_name(DAY)) == 2
        assert await _count(store.db, "evidence_default") == 0
        assert [r.request_id for r in await store.query_evidence()] == ["r3", "r2", "r1"]
        await store.write_evidence(rows)  # a replayed batch still collides on the key
        assert await _count(store.db, "evidence") == 3
    finally:
        await store.close()

    await asyncio.to_thread(_downgrade, url, "spend")  # and back to one table, rows kept
    connection = await asyncpg.connect(**connect_kwargs(url))
    try:
        kept = await connection.fetch(
            "SELECT request_id FROM evidence ORDER BY started_at DESC, request_id DESC"
        )
    finally:
        await connection.close()
    assert [row["request_id"] for row in kept] == ["r3", "r2", "r1"]


async def _write_at_that_revision(url: str, rows: list[EvidenceRow]) -> None:
    """The rows as a release of that revision wrote them: only the columns it had (today's
    writer names columns later migrations added)."""
    connection = await asyncpg.connect(**connect_kwargs(url))
    try:
        await connection.executemany(
            "INSERT INTO evidence (request_id, endpoint, stream, outcome, qualifying, started_at,"
            " duration_ms, malformed_chunks) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            [
                (
                    r.request_id,
                    r.endpoint,
                    r.stream,
                    r.outcome,
                    r.qualifying,
                    r.started_at,
                    r.duration_ms,
                    r.malformed_chunks,
                )
                for r in rows
            ],
        )
    finally:
        await connection.close()


def _downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


@pytest.mark.postgres
async def test_partitions_are_created_ahead_once_even_by_racing_replicas(
    fresh_pg_database: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_pg_database)
    replicas = [Database.connect(fresh_pg_database) for _ in range(3)]
    try:
        created = await asyncio.gather(
            *(EvidencePartitions(db).ensure(DAY, ahead=3) for db in replicas)
        )
        wanted = [partition_name(DAY + timedelta(days=n)) for n in range(-1, 4)]
        assert sorted(name for names in created for name in names) == wanted
        assert await EvidencePartitions(replicas[0]).ensure(DAY, ahead=3) == []
        assert await EvidencePartitions(replicas[0]).existing() == ["evidence_default", *wanted]
    finally:
        for db in replicas:
            await db.dispose()


@pytest.mark.postgres
async def test_rows_of_a_missing_day_wait_in_the_default_partition_then_move(
    fresh_pg_database: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_pg_database)
    store = Store.connect(fresh_pg_database)
    try:
        await store.write_evidence(
            [evidence_row("early", at(DAY, 1)), evidence_row("late", at(DAY, 22))]
        )
        assert await _count(store.db, "evidence_default") == 2  # nobody created the day yet

        await EvidencePartitions(store.db).ensure(DAY, ahead=0)

        assert await _count(store.db, "evidence_default") == 0
        assert await _count(store.db, partition_name(DAY)) == 2
        assert [r.request_id for r in await store.query_evidence()] == ["late", "early"]
        await store.write_evidence([evidence_row("early", at(DAY, 1))])  # the key still holds
        assert await _count(store.db, "evidence") == 2
    finally:
        await store.close()


async def test_prune_removes_every_row_before_the_cutoff_day(database_url: str) -> None:
    url = database_url
    store = Store.connect(url)
    partitions = EvidencePartitions(store.db)
    try:
        await partitions.ensure(DAY, ahead=1)  # DAY-1 .. DAY+1; DAY-3 lands in the default
        days = {"d-3": DAY - timedelta(3), "d-1": DAY - timedelta(1), "d0": DAY, "d1": DAY}
        await store.write_evidence([evidence_row(name, at(day)) for name, day in days.items()])

        pruned = await partitions.prune(before=DAY)

        assert [r.request_id for r in await store.query_evidence()] == ["d1", "d0"]
        if url.startswith("sqlite"):
            assert (pruned.dropped, pruned.deleted_rows) == ([], 2)
        else:
            assert pruned.dropped == [partition_name(DAY - timedelta(1))]
            assert pruned.deleted_rows == 1  # d-3 from the default partition
            assert partition_name(DAY) in await partitions.existing()
        assert (await partitions.prune(before=DAY)).dropped == []
    finally:
        await store.close()
