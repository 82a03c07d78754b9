"""Writing an evidence batch on Postgres over plain asyncpg (no SQLAlchemy): one prepared
statement over column arrays (`INSERT … SELECT * FROM unnest($1::text[], …) ON CONFLICT DO
NOTHING`), one round trip and no ORM work per row; each row is read straight off the
`EvidenceRow` dataclass. Used by the SQLAlchemy `Store` (`leasegate.db.evidence_write`) and
the proxy's store (`leasegate.pg.proxy_store`) alike.

A replayed row collides with itself on the table's one unique key and is ignored. The conflict
names no target on purpose: that key is `(request_id, started_at)` on Postgres's partitioned
table and `request_id` on SQLite and on a Postgres not yet migrated to partitions, so one
statement is right on all three (and across a rolling upgrade).

A failure leaves as the core's error (`PgPool` sorts it by `leasegate.pg.errors.store_error`):
content the database refuses (SQLSTATE classes 22 and 23, or a value the driver cannot encode)
is `StoreRejected`; anything else is `StoreUnavailable`: "try the same rows again later".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter

from leasegate.core.records import EvidenceRow
from leasegate.pg.pool import PgPool

TABLE = "evidence"

FIELDS = tuple(f.name for f in fields(EvidenceRow))
"""The columns written, in `EvidenceRow`'s order."""

ARRAY_TYPES: dict[str, str] = {
    "request_id": "text[]",
    "key_id": "text[]",
    "mint_decision_id": "text[]",
    "account_id": "text[]",
    "requested_model": "text[]",
    "served_model": "text[]",
    "endpoint": "text[]",
    "stream": "bool[]",
    "upstream_status": "int8[]",
    "outcome": "text[]",
    "refusal_reason": "text[]",
    "error_code": "text[]",
    "scope": "text[]",
    "qualifying": "bool[]",
    "input_tokens": "int8[]",
    "output_tokens": "int8[]",
    "cache_read_input_tokens": "int8[]",
    "cache_creation_input_tokens": "int8[]",
    "started_at": "timestamptz[]",
    "first_byte_ms": "float8[]",
    "duration_ms": "float8[]",
    "malformed_chunks": "int8[]",
    "cost": "numeric[]",
    "usage_estimated": "bool[]",
    "retry_after_ms": "float8[]",
}
"""Each column's array type in the insert. Strings travel as text[]: an explicit varchar(n)
cast would silently truncate, while the insert's assignment cast refuses an oversized value
(class 22, so the row is isolated). Plain data, so writing evidence needs no ORM model; a test
(`tests/unit/test_evidence_array_types.py`) holds it to the model's columns, so a new column
fails there until it is added here."""

_row_values = attrgetter(*FIELDS)


def _insert() -> str:
    arrays = ", ".join(f"${i}::{ARRAY_TYPES[name]}" for i, name in enumerate(FIELDS, start=1))
    # every name is the schema's own: nothing here comes from input
    insert = f"INSERT INTO {TABLE} ({', '.join(FIELDS)}) SELECT * FROM unnest({arrays})"  # noqa: S608
    return f"{insert} ON CONFLICT DO NOTHING"


INSERT = _insert()


def row_values(row: EvidenceRow) -> tuple[object, ...]:
    """The row's values in `FIELDS` order."""
    values: tuple[object, ...] = _row_values(row)
    return values


async def write_rows(pool: PgPool, rows: Sequence[EvidenceRow]) -> None:
    """One statement (so one transaction); see the module docstring for what it raises."""
    if not rows:
        return
    columns = list(zip(*map(_row_values, rows), strict=True))
    # the pool drops a connection the failure may have broken (and the idle ones with it) and
    # raises the core's error for it
    async with pool.connection() as connection:
        await connection.execute(INSERT, *columns)
