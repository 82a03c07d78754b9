"""Writing evidence batches: one INSERT per batch that ignores a request id already present.

On Postgres the batch goes through asyncpg directly (a connection of `Database.pg`), as one
prepared statement over column arrays
(`INSERT … SELECT * FROM unnest($1::text[], …) ON CONFLICT … DO NOTHING`): one round trip and
no ORM work per row; the row is read straight off the `EvidenceRow` dataclass. SQLite
(the embedded mode) keeps SQLAlchemy's insert.

Either way a failure leaves as the core's error, sorted by `leasegate.db.errors.store_error`:
content the database refuses (SQLSTATE classes 22 and 23, or a value the driver cannot encode)
is `StoreRejected`; anything else (connection refused, reset, timeout, shutdown) is
`StoreUnavailable`, which means "try the same rows again later".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

from sqlalchemy import Boolean, Float, Integer, Numeric, String
from sqlalchemy.dialects import sqlite
from sqlalchemy.types import TypeEngine

from leasegate.core.records import EvidenceRow
from leasegate.db.engine import Database
from leasegate.db.errors import RAW_CALL_ERRORS, store_error
from leasegate.db.models import EvidenceRecordRow
from leasegate.db.models.base import UTCDateTime

# A replayed row collides with itself on the table's one unique key and is ignored. The
# conflict names no target on purpose: that key is `(request_id, started_at)` on Postgres's
# partitioned table and `request_id` on SQLite and on a Postgres not yet migrated to
# partitions, so one statement is right on all three (and across a rolling upgrade).

FIELDS = tuple(f.name for f in fields(EvidenceRow))
_row_values = attrgetter(*FIELDS)


def _array_type(column_type: TypeEngine[Any]) -> str:
    # Strings travel as text[]: an explicit varchar(n) cast would silently truncate, while the
    # insert's assignment cast refuses an oversized value (class 22, so the row is isolated).
    if isinstance(column_type, UTCDateTime):
        return "timestamptz[]"
    if isinstance(column_type, Boolean):
        return "bool[]"
    if isinstance(column_type, Integer):
        return "int8[]"
    if isinstance(column_type, Float):
        return "float8[]"
    if isinstance(column_type, Numeric):  # after Float, which is a Numeric
        return "numeric[]"
    if isinstance(column_type, String):
        return "text[]"
    raise TypeError(f"no array type for {column_type!r}")


def _postgres_insert() -> str:
    columns = EvidenceRecordRow.__table__.columns
    arrays = ", ".join(
        f"${i}::{_array_type(columns[name].type)}" for i, name in enumerate(FIELDS, start=1)
    )
    # every name is the model's own: nothing here comes from input
    table = EvidenceRecordRow.__tablename__
    insert = f"INSERT INTO {table} ({', '.join(FIELDS)}) SELECT * FROM unnest({arrays})"  # noqa: S608
    return f"{insert} ON CONFLICT DO NOTHING"


POSTGRES_INSERT = _postgres_insert()


async def write_rows(db: Database, rows: Sequence[EvidenceRow]) -> None:
    """One transaction; see the module docstring for what it raises."""
    if not rows:
        return
    if db.dialect == "postgresql":
        await _write_postgres(db, rows)
    else:
        await _write_sqlite(db, rows)


async def _write_postgres(db: Database, rows: Sequence[EvidenceRow]) -> None:
    columns = list(zip(*map(_row_values, rows), strict=True))
    # the pool drops a connection the failure may have broken (and the idle ones with it) and
    # raises the core's error for it
    async with db.pg.connection() as connection:
        await connection.execute(POSTGRES_INSERT, *columns)


async def _write_sqlite(db: Database, rows: Sequence[EvidenceRow]) -> None:
    statement = sqlite.insert(EvidenceRecordRow).on_conflict_do_nothing()
    values = [dict(zip(FIELDS, _row_values(r), strict=True)) for r in rows]
    async with db.session() as session:
        try:
            await session.execute(statement, values)
        except RAW_CALL_ERRORS as exc:
            # aiosqlite's encoding errors (a lone surrogate) reach here unwrapped
            raise store_error(exc) from exc
