"""Writing evidence batches: one INSERT per batch that ignores a request id already present.

On Postgres the batch goes through asyncpg directly (`leasegate.pg.evidence`, on a
connection of `Database.pg`). SQLite (the embedded mode) keeps SQLAlchemy's insert. Either way
a failure leaves as the core's error, sorted by `leasegate.pg.errors.store_error`:
`StoreRejected` when the content is at fault, `StoreUnavailable` ("try the same rows again
later") otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.dialects import sqlite

from leasegate.core.records import EvidenceRow
from leasegate.db.engine import Database
from leasegate.db.models import EvidenceRecordRow
from leasegate.pg import evidence as evidence_pg
from leasegate.pg.errors import RAW_CALL_ERRORS, store_error
from leasegate.pg.evidence import FIELDS, row_values


async def write_rows(db: Database, rows: Sequence[EvidenceRow]) -> None:
    """One transaction; see the module docstring for what it raises."""
    if not rows:
        return
    if db.dialect == "postgresql":
        await evidence_pg.write_rows(db.pg, rows)
    else:
        await _write_sqlite(db, rows)


async def _write_sqlite(db: Database, rows: Sequence[EvidenceRow]) -> None:
    statement = sqlite.insert(EvidenceRecordRow).on_conflict_do_nothing()
    values = [dict(zip(FIELDS, row_values(r), strict=True)) for r in rows]
    async with db.session() as session:
        try:
            await session.execute(statement, values)
        except RAW_CALL_ERRORS as exc:
            # aiosqlite's encoding errors (a lone surrogate) reach here unwrapped
            raise store_error(exc) from exc
