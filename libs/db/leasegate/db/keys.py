"""Reading keys, ending them, and counting the leases they are.

A lease is a live key row (`revoked_at IS NULL AND expires_at > now`), so counting leases is a
query, not a counter that could drift, and a restart neither forgets nor double-counts one.
Every path that ends a key is one conditional UPDATE; its returned rows say which call won.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import ColumnElement, Update, and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from leasegate.core.records import KeyRecord, MintDecision, RevokeReason
from leasegate.db.convert import decision_record, key_record
from leasegate.db.engine import Database
from leasegate.db.models import KeyRow, MintDecisionRow
from leasegate.pg import keys as keys_pg


def is_live(now: datetime) -> ColumnElement[bool]:
    return and_(KeyRow.revoked_at.is_(None), KeyRow.expires_at > now)


class KeyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_key(self, key_id: str) -> KeyRecord | None:
        if self._db.dialect == "postgresql":
            return await keys_pg.get_key(self._db.pg, key_id)
        async with self._db.session() as session:
            row = await session.get(KeyRow, key_id)
            return key_record(row) if row is not None else None

    async def get_key_and_decision(
        self, key_id: str
    ) -> tuple[KeyRecord, MintDecision | None] | None:
        if self._db.dialect == "postgresql":
            return await keys_pg.get_key_and_decision(self._db.pg, key_id)
        async with self._db.session() as session:
            row = await session.get(KeyRow, key_id)
            if row is None:
                return None
            decision = await session.get(MintDecisionRow, row.mint_decision_id)
            return key_record(row), decision_record(decision) if decision is not None else None

    async def revoke_key(
        self, key_id: str, reason: RevokeReason, now: datetime
    ) -> tuple[KeyRecord | None, bool]:
        """(the record after, whether this call ended it). An expired key already ended: it is
        left as it is and reported not ended by this call."""
        if self._db.dialect == "postgresql":
            return await keys_pg.revoke_key(self._db.pg, key_id, reason, now)
        async with self._db.session() as session:
            ended = (
                await session.scalars(_end(KeyRow.key_id == key_id, reason, now).returning(KeyRow))
            ).one_or_none()
            if ended is not None:
                return key_record(ended), True
            row = await session.get(KeyRow, key_id)
            return (key_record(row) if row is not None else None), False

    async def revoke_account_keys(
        self, account_id: str, reason: RevokeReason, now: datetime
    ) -> list[KeyRecord]:
        async with self._db.session() as session:
            return await end_account_keys(session, account_id, reason, now)

    async def live_lease_counts(self, account_ids: Iterable[str], now: datetime) -> dict[str, int]:
        if self._db.dialect == "postgresql":
            return await keys_pg.live_lease_counts(self._db.pg, account_ids, now)
        counts = dict.fromkeys(account_ids, 0)
        if not counts:
            return counts
        async with self._db.session() as session:
            rows = await session.execute(
                select(KeyRow.account_id, func.count())
                .where(KeyRow.account_id.in_(counts), is_live(now))
                .group_by(KeyRow.account_id)
            )
            for account_id, count in rows:
                counts[account_id] = count
        return counts


async def end_account_keys(
    session: AsyncSession, account_id: str, reason: str, now: datetime
) -> list[KeyRecord]:
    """End every live key of the account inside the caller's transaction (an admin disable
    revokes in the same transaction as its audit record); the keys this call ended."""
    # lock the rows in key order first, so two concurrent calls cannot deadlock
    await session.execute(
        select(KeyRow.key_id)
        .where(KeyRow.account_id == account_id, is_live(now))
        .order_by(KeyRow.key_id)
        .with_for_update()
    )
    ended = await session.scalars(
        _end(KeyRow.account_id == account_id, reason, now).returning(KeyRow)
    )
    return sorted((key_record(row) for row in ended), key=lambda k: k.key_id)


def _end(which: ColumnElement[bool], reason: str, now: datetime) -> Update:
    return (
        update(KeyRow)
        .where(which, is_live(now))
        .values(revoked_at=now, revoke_reason=reason, live_dispatch=None)
        .execution_options(synchronize_session=False)
    )
