"""Key and decision reads and revocation on Postgres, on a plain asyncpg connection
(a `PgPool`: `Database.pg`, or the proxy's own, `leasegate.pg.proxy_store`): each one prepared
statement, one round trip, no unit of work, no SQLAlchemy. SQLite goes through the ORM
(`leasegate.db.keys`, `leasegate.db.decisions`); both keep one contract
(`tests/contract/test_mint_store.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from leasegate.core.records import KeyRecord, MintDecision, RevokeReason
from leasegate.pg.pool import PgPool
from leasegate.pg.rows import (
    DECISION_COLUMNS,
    KEY_COLUMNS,
    decision_of_row,
    key_of_row,
    prefixed,
    prefixed_columns,
)

# every name below is the schema's own: nothing here comes from input
_GET_KEY = f"SELECT {KEY_COLUMNS} FROM keys WHERE key_id = $1"  # noqa: S608
_GET_DECISION = f"SELECT {DECISION_COLUMNS} FROM mint_decisions WHERE id = $1"  # noqa: S608
_GET_KEY_AND_DECISION = (
    f"SELECT {prefixed_columns('k', KEY_COLUMNS)}, {prefixed_columns('d', DECISION_COLUMNS)} "  # noqa: S608
    "FROM keys k LEFT JOIN mint_decisions d ON d.id = k.mint_decision_id WHERE k.key_id = $1"
)
_END_KEY = (
    "UPDATE keys SET revoked_at = $3, revoke_reason = $2, live_dispatch = NULL "  # noqa: S608
    f"WHERE key_id = $1 AND revoked_at IS NULL AND expires_at > $3 RETURNING {KEY_COLUMNS}"
)
_LEASE_COUNTS = (
    "SELECT account_id, count(*) FROM keys WHERE account_id = ANY($1::text[]) "
    "AND revoked_at IS NULL AND expires_at > $2 GROUP BY account_id"
)


# Reads go through `PgPool.read`: run again once on a fresh connection if the first was lost.


async def get_key(pool: PgPool, key_id: str) -> KeyRecord | None:
    row = await pool.read(lambda connection: connection.fetchrow(_GET_KEY, key_id))
    return key_of_row(row) if row is not None else None


async def get_decision(pool: PgPool, decision_id: str) -> MintDecision | None:
    row = await pool.read(lambda connection: connection.fetchrow(_GET_DECISION, decision_id))
    return decision_of_row(row) if row is not None else None


async def get_key_and_decision(
    pool: PgPool, key_id: str
) -> tuple[KeyRecord, MintDecision | None] | None:
    row = await pool.read(lambda connection: connection.fetchrow(_GET_KEY_AND_DECISION, key_id))
    if row is None:
        return None
    decision = prefixed(row, "d")
    found = decision_of_row(decision) if decision["id"] is not None else None
    return key_of_row(prefixed(row, "k")), found


async def revoke_key(
    pool: PgPool, key_id: str, reason: RevokeReason, now: datetime
) -> tuple[KeyRecord | None, bool]:
    """(the record after, whether this call ended it): the conditional UPDATE, and only when
    it ended nothing a read of the row as it now stands (a separate statement, so it sees a
    concurrent revocation that won)."""
    async with pool.connection() as connection:
        ended = await connection.fetchrow(_END_KEY, key_id, reason, now)
        if ended is not None:
            return key_of_row(ended), True
        row = await connection.fetchrow(_GET_KEY, key_id)
    return (key_of_row(row) if row is not None else None), False


async def live_lease_counts(
    pool: PgPool, account_ids: Iterable[str], now: datetime
) -> dict[str, int]:
    counts = dict.fromkeys(account_ids, 0)
    if not counts:
        return counts
    ids = list(counts)
    rows = await pool.read(lambda connection: connection.fetch(_LEASE_COUNTS, ids, now))
    for account_id, count in rows:
        counts[account_id] = count
    return counts
