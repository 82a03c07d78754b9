"""Evidence partitions on Postgres: one per UTC day, created ahead, dropped whole.

`evidence` is partitioned by range on `started_at` (migration `evidence_partitions`):
`evidence_pYYYYMMDD` holds `[day 00:00 UTC, next day 00:00 UTC)`, and `evidence_default`
catches a row of a day nobody created yet, so an insert never fails for want of a partition.

- `ensure` creates the partitions of yesterday, today and the next `ahead` days that are
  missing, under an exclusive lock on `evidence` held for the few milliseconds the DDL takes
  (inserts and reads wait; an insert racing a change of bounds could otherwise be routed to
  the default partition by the old bounds and fail). If the default partition already holds
  rows of such a day (the control plane was down long enough), they are moved into the new
  partition in the same transaction: Postgres refuses to attach a day whose rows sit in the
  default one. In steady state one partition is created a day, a week ahead.
- `prune` drops every partition whose whole day is before the cutoff (a `DROP TABLE`: no row
  by row delete, no table bloat) and deletes the default partition's rows before it.

Both take a transaction-scoped advisory lock first, so several control-plane replicas running
them at once queue instead of racing on the catalog, and give up (to be retried) rather than
wait more than LOCK_TIMEOUT_MS for a lock. On SQLite (one table) `ensure` does
nothing and `prune` deletes the rows before the cutoff.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import delete, text
from sqlalchemy.ext.asyncio import AsyncSession

from leasegate.db.engine import Database
from leasegate.db.models import EvidenceRecordRow

DAYS_AHEAD = 7
"""Partitions created ahead of today: a week of control-plane outage before rows reach the
default partition."""

DEFAULT_PARTITION = "evidence_default"

LOCK_TIMEOUT_MS = 5000
"""Longest wait for a lock on `evidence` (or the advisory lock) before a run gives up."""

_NAME = re.compile(r"^evidence_p(\d{8})$")

# A fixed key for pg_advisory_xact_lock: "LGEVPART" as a 64-bit integer.
_LOCK_KEY = int.from_bytes(b"LGEVPART", "big") - 2**63


def partition_name(day: date) -> str:
    return f"evidence_p{day:%Y%m%d}"


def partition_day(name: str) -> date | None:
    """The day a partition holds, or None for a name that is not a daily partition."""
    found = _NAME.match(name)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y%m%d").replace(tzinfo=UTC).date()


def is_partition_name(name: str) -> bool:
    """Whether `name` is one of evidence's partitions (not a table of the models)."""
    return name == DEFAULT_PARTITION or partition_day(name) is not None


def include_name(name: str | None, type_: str, _parents: object) -> bool:
    """Alembic's `include_name` hook: evidence's partitions are data, not schema, so schema
    comparisons (autogenerate, the drift test) leave them out."""
    return not (type_ == "table" and name is not None and is_partition_name(name))


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def days_wanted(today: date, ahead: int) -> list[date]:
    """Yesterday (a clock a little behind), today and `ahead` days after it."""
    return [today + timedelta(days=offset) for offset in range(-1, ahead + 1)]


def days_to_drop(existing: Iterable[str], before: date) -> list[str]:
    """Partitions whose whole day is before `before`, oldest first."""
    days = sorted((day, name) for name in existing if (day := partition_day(name)) is not None)
    return [name for day, name in days if day < before]


@dataclass(frozen=True)
class Pruned:
    dropped: list[str]
    """Whole partitions dropped, oldest first."""
    deleted_rows: int
    """Rows deleted one by one: SQLite's, or those the default partition held."""


class EvidencePartitions:
    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def partitioned(self) -> bool:
        return self._db.dialect == "postgresql"

    async def existing(self) -> list[str]:
        """The names of evidence's partitions (empty on SQLite)."""
        if not self.partitioned:
            return []
        async with self._db.session() as session:
            return await _partitions(session)

    async def ensure(self, today: date, ahead: int = DAYS_AHEAD) -> list[str]:
        """Create the missing partitions of yesterday..today+ahead; the names created."""
        if not self.partitioned:
            return []
        async with self._db.session() as session:
            await _serialise(session)
            present = set(await _partitions(session))
            missing = [
                day for day in days_wanted(today, ahead) if partition_name(day) not in present
            ]
            if missing:
                # No insert may run while the partition bounds change: one routed by the old
                # bounds to the default partition would fail its new constraint.
                await session.execute(text("LOCK TABLE evidence IN ACCESS EXCLUSIVE MODE"))
            for day in missing:
                await _create(session, partition_name(day), day)
        return [partition_name(day) for day in missing]

    async def prune(self, before: date) -> Pruned:
        """Remove every evidence row that started before `before` (00:00 UTC that day)."""
        cutoff = day_start(before)
        older = delete(EvidenceRecordRow).where(EvidenceRecordRow.started_at < cutoff)
        async with self._db.session() as session:
            if not self.partitioned:
                deleted = (await session.execute(older)).rowcount  # type: ignore[attr-defined]
                return Pruned([], int(deleted or 0))
            await _serialise(session)
            dropped = days_to_drop(await _partitions(session), before)
            for name in dropped:
                await session.execute(text(f'DROP TABLE "{name}"'))
            moved = await session.execute(
                text("DELETE FROM evidence_default WHERE started_at < :cutoff"),
                {"cutoff": cutoff},
            )
            return Pruned(dropped, int(moved.rowcount or 0))  # type: ignore[attr-defined]


async def _serialise(session: AsyncSession) -> None:
    """One upkeep at a time across replicas; and never a long queue behind a slow reader:
    waiting longer than LOCK_TIMEOUT for a table lock fails this run (retried later)."""
    await session.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'"))
    await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


async def _partitions(session: AsyncSession) -> list[str]:
    rows = await session.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'evidence'::regclass ORDER BY c.relname"
        )
    )
    return [str(name) for (name,) in rows]


async def _create(session: AsyncSession, name: str, day: date) -> None:
    """A new table, rows of its day moved in from the default partition, then attached."""
    low, high = day_start(day).isoformat(), day_start(day + timedelta(days=1)).isoformat()
    # DDL takes no bind parameters; the name and both bounds derive from a `date`, never from
    # input, so they are rendered here.
    of_day = f"started_at >= '{low}' AND started_at < '{high}'"
    await session.execute(text(f'CREATE TABLE "{name}" (LIKE evidence INCLUDING DEFAULTS)'))
    # Rows of this day already in the default partition (nobody created the day in time) move
    # first: Postgres refuses to attach a range the default partition holds rows of.
    await session.execute(
        text(
            f"WITH moved AS (DELETE FROM {DEFAULT_PARTITION} WHERE {of_day} RETURNING *) "  # noqa: S608 - see above
            f'INSERT INTO "{name}" SELECT * FROM moved'
        )
    )
    await session.execute(
        text(
            f'ALTER TABLE evidence ATTACH PARTITION "{name}" '
            f"FOR VALUES FROM ('{low}') TO ('{high}')"
        )
    )
