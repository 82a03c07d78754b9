"""Writing evidence batches: one INSERT per batch that ignores a request id already present.

On Postgres the batch goes through asyncpg directly (a connection of `Database.pg`), as one
prepared statement over column arrays
(`INSERT … SELECT * FROM unnest($1::text[], …) ON CONFLICT … DO NOTHING`): one round trip and
no ORM work per row; the row is read straight off the `EvidenceRow` dataclass. SQLite
(the embedded mode) keeps SQLAlchemy's insert.

Either way a failure is sorted here, where the driver is known: content the database refuses
(SQLSTATE classes 22 and 23, or a value the driver cannot encode) raises `EvidenceRejected`;
anything else (connection refused, reset, timeout, shutdown) propagates as it is and means
"try the same rows again later".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

import asyncpg
from sqlalchemy import Boolean, Float, Integer, Numeric, String
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DataError, IntegrityError, StatementError
from sqlalchemy.types import TypeEngine

from leasegate.core.ports.storage import EvidenceRejected
from leasegate.core.records import EvidenceRow
from leasegate.db.engine import Database
from leasegate.db.models import EvidenceRecordRow
from leasegate.db.models.base import UTCDateTime

# A replayed row collides with itself on the table's one unique key and is ignored. The
# conflict names no target on purpose: that key is `(request_id, started_at)` on Postgres's
# partitioned table and `request_id` on SQLite and on a Postgres not yet migrated to
# partitions, so one statement is right on all three (and across a rolling upgrade).

FIELDS = tuple(f.name for f in fields(EvidenceRow))
_row_values = attrgetter(*FIELDS)

# Postgres SQLSTATE classes that mean "this content cannot be stored": data exception and
# integrity constraint violation. Every other error is the connection's or the server's state.
_REJECTING_SQLSTATE_CLASSES = ("22", "23")


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


_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    UnicodeError,
    ValueError,
    TypeError,
)


class EvidenceStoreUnreachable(ConnectionError):
    """A driver error that is the connection's or the server's state, not the rows'."""


def rejection(exc: BaseException) -> EvidenceRejected | None:
    """The `EvidenceRejected` for a content error, None for anything else."""
    if isinstance(exc, asyncpg.PostgresError):
        if str(exc.sqlstate or "")[:2] in _REJECTING_SQLSTATE_CLASSES:
            return EvidenceRejected(type(exc).__name__)
        return None
    if isinstance(exc, asyncpg.exceptions.DataError | UnicodeError | ValueError | TypeError):
        return EvidenceRejected(type(exc).__name__)  # the driver could not encode a value
    if isinstance(exc, IntegrityError | DataError):
        return EvidenceRejected(type(exc.orig).__name__)
    if isinstance(exc, StatementError) and isinstance(exc.orig, UnicodeError | ValueError):
        return EvidenceRejected(type(exc.orig).__name__)
    return None


async def write_rows(db: Database, rows: Sequence[EvidenceRow]) -> None:
    """One transaction; see the module docstring for what it raises."""
    if not rows:
        return
    try:
        if db.dialect == "postgresql":
            await _write_postgres(db, rows)
        else:
            await _write_sqlite(db, rows)
    except Exception as exc:
        rejected = rejection(exc)
        if rejected is not None:
            raise rejected from exc
        if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
            # a terminated backend, a server shutting down, a refused connection
            raise EvidenceStoreUnreachable(type(exc).__name__) from exc
        raise


async def _write_postgres(db: Database, rows: Sequence[EvidenceRow]) -> None:
    columns = list(zip(*map(_row_values, rows), strict=True))
    # the pool drops a connection the failure may have broken (and the idle ones with it);
    # every driver error comes back as it is, for `write_rows` to sort
    async with db.pg.connection(_DRIVER_ERRORS) as connection:
        await connection.execute(POSTGRES_INSERT, *columns)


async def _write_sqlite(db: Database, rows: Sequence[EvidenceRow]) -> None:
    statement = sqlite.insert(EvidenceRecordRow).on_conflict_do_nothing()
    async with db.session() as session:
        await session.execute(
            statement, [dict(zip(FIELDS, _row_values(r), strict=True)) for r in rows]
        )
