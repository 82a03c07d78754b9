"""Mints and renewals: each one transaction that writes everything or nothing.

Lock order, everywhere: the account's `account_leases` row, then key rows. Keeping one order
is what keeps concurrent mints, renewals and revocations free of deadlocks on Postgres; on
SQLite every write transaction holds the database lock from BEGIN IMMEDIATE anyway.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    IdempotencyKeyTaken,
    KeyNotLive,
    LeaseCapacityExhausted,
)
from leasegate.core.records import RENEWED, KeyRecord, MintDecision
from leasegate.db.audit_lock import lock_for_mint
from leasegate.db.convert import decision_values, key_record, key_values
from leasegate.db.engine import Database
from leasegate.db.keys import is_live
from leasegate.db.mint_pg import commit_mint_pg, record_decision_pg, renew_key_pg
from leasegate.db.models import AccountLeaseRow, KeyRow, MintDecisionRow, live_dispatch_of
from leasegate.db.models.audit_anchor import ANCHOR_ID, AuditAnchorRow
from leasegate.db.models.audit_record import AuditRecordRow


class MintRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_decision(self, decision: MintDecision) -> None:
        """A refused mint: the decision alone."""
        if self._db.dialect == "postgresql":
            await record_decision_pg(self._db, decision)
            return
        async with self._db.session(_refusal) as session:
            await session.execute(insert(MintDecisionRow).values(decision_values(decision)))

    async def commit_mint(
        self,
        decision: MintDecision,
        key: KeyRecord,
        *,
        lease_capacity: int | None,
        now: datetime,
        admin_revision: int | None = None,
    ) -> None:
        if self._db.dialect == "postgresql":
            await commit_mint_pg(
                self._db,
                decision,
                key,
                lease_capacity=lease_capacity,
                now=now,
                admin_revision=admin_revision,
            )
            return
        async with self._db.session(_refusal) as session:
            if admin_revision is not None:
                await _hold_admin_revision(session, self._db.dialect, admin_revision)
            await _claim_dispatch(session, key, now)
            if lease_capacity is not None:
                await _lock_account(session, self._db.dialect, key.account_id)
                await _check_capacity(session, key.account_id, lease_capacity, now)
            if decision.cites_decision_id is not None:
                await _link_successor(session, decision.cites_decision_id, decision.id)
            await session.execute(insert(MintDecisionRow).values(decision_values(decision)))
            await session.execute(insert(KeyRow).values(key_values(key)))

    async def renew_key(
        self,
        old_key_id: str,
        decision: MintDecision,
        new_key: KeyRecord,
        *,
        lease_capacity: int | None,
        now: datetime,
        admin_revision: int | None = None,
    ) -> KeyRecord:
        if self._db.dialect == "postgresql":
            return await renew_key_pg(
                self._db,
                old_key_id,
                decision,
                new_key,
                lease_capacity=lease_capacity,
                now=now,
                admin_revision=admin_revision,
            )
        async with self._db.session(_refusal) as session:
            if admin_revision is not None:
                await _hold_admin_revision(session, self._db.dialect, admin_revision)
            account_id = await session.scalar(
                select(KeyRow.account_id).where(KeyRow.key_id == old_key_id)
            )
            if account_id is None:
                raise KeyNotLive(old_key_id)
            if account_id != new_key.account_id:
                raise ValueError("a renewal stays on the old key's account")
            if lease_capacity is not None:
                await _lock_account(session, self._db.dialect, account_id)
            # Ending the old key first frees its dispatch slot and its lease slot for the
            # new one; the transaction makes the swap invisible until both exist.
            ended = (
                await session.scalars(
                    update(KeyRow)
                    .where(KeyRow.key_id == old_key_id, is_live(now))
                    .values(revoked_at=now, revoke_reason=RENEWED, live_dispatch=None)
                    .returning(KeyRow)
                    .execution_options(synchronize_session=False)
                )
            ).one_or_none()
            if ended is None:
                raise KeyNotLive(old_key_id)
            if lease_capacity is not None:
                await _check_capacity(session, account_id, lease_capacity, now)
            if decision.cites_decision_id is not None:
                # the renewal continues the renewed decision's chain: citing the renewed
                # one afterwards is `superseded`, so a chain never branches through a renewal
                await _link_successor(session, decision.cites_decision_id, decision.id)
            await session.execute(insert(MintDecisionRow).values(decision_values(decision)))
            await session.execute(insert(KeyRow).values(key_values(new_key)))
            return key_record(ended)


async def _claim_dispatch(session: AsyncSession, key: KeyRecord, now: datetime) -> None:
    """Release this dispatch's slot from keys that expired, then refuse if one is still live.

    The check gives the right refusal before the capacity check; the UNIQUE on live_dispatch
    is what enforces it against concurrent mints.
    """
    slot = live_dispatch_of(key.tenant, key.dispatch_id)
    await session.execute(
        update(KeyRow)
        .where(KeyRow.live_dispatch == slot, KeyRow.expires_at <= now)
        .values(live_dispatch=None)
        .execution_options(synchronize_session=False)
    )
    held = await session.scalar(select(KeyRow.key_id).where(KeyRow.live_dispatch == slot))
    if held is not None:
        raise DispatchLeaseHeld(held)


async def _hold_admin_revision(session: AsyncSession, dialect: str, expected: int) -> None:
    """Insist the audit chain is as long as when the overlay was read, and still ends where
    its anchor says, under the lock an admin mutation takes exclusively: a mutation waits for
    mints already committing (and then revokes their keys), and mints that start meanwhile see
    the new length and decide again, so a disable can never miss a key minted concurrently.
    A chain cut or re-headed behind the anchor's back moves too: the caller re-folds it and
    finds it corrupt. (`leasegate_commit_mint` runs the same check on Postgres.)"""
    await lock_for_mint(session, dialect)
    anchor = (
        await session.execute(
            select(AuditAnchorRow.count, AuditAnchorRow.head_hash).where(
                AuditAnchorRow.id == ANCHOR_ID
            )
        )
    ).first()
    count = anchor.count if anchor is not None else 0
    if count != expected:
        raise AdminStateMoved(f"audit chain at {count}, overlay read at {expected}")
    records = await session.scalar(select(func.count()).select_from(AuditRecordRow))
    last = await session.scalar(
        select(AuditRecordRow.hash).order_by(AuditRecordRow.seq.desc()).limit(1)
    )
    if records != count or (anchor is not None and last != anchor.head_hash):
        raise AdminStateMoved("the audit chain no longer ends where its anchor says")


async def _lock_account(session: AsyncSession, dialect_name: str, account_id: str) -> None:
    """Serialise lease reservations on one account across every replica until commit."""
    dialect = postgresql if dialect_name == "postgresql" else sqlite
    await session.execute(
        dialect.insert(AccountLeaseRow).values(account_id=account_id).on_conflict_do_nothing()
    )
    # FOR UPDATE is Postgres' row lock; SQLite renders none and is already serialised
    await session.execute(
        select(AccountLeaseRow.account_id)
        .where(AccountLeaseRow.account_id == account_id)
        .with_for_update()
    )


async def _check_capacity(
    session: AsyncSession, account_id: str, capacity: int, now: datetime
) -> None:
    held = await session.scalar(
        select(func.count())
        .select_from(KeyRow)
        .where(KeyRow.account_id == account_id, is_live(now))
    )
    if (held or 0) >= capacity:
        raise LeaseCapacityExhausted(account_id)


async def _link_successor(session: AsyncSession, cited_id: str, successor_id: str) -> None:
    linked = await session.scalar(
        update(MintDecisionRow)
        .where(MintDecisionRow.id == cited_id, MintDecisionRow.successor_id.is_(None))
        .values(successor_id=successor_id)
        .returning(MintDecisionRow.id)
        .execution_options(synchronize_session=False)
    )
    if linked is None:
        raise CitedDecisionSuperseded(cited_id)


def _refusal(exc: DBAPIError) -> Exception | None:
    """The constraint a concurrent writer won on; None for any other error (a failure)."""
    if not isinstance(exc, IntegrityError):
        return None
    message = str(exc.orig)
    if "live_dispatch" in message:
        return DispatchLeaseHeld(message)
    if "idempotency_key" in message:
        return IdempotencyKeyTaken(message)
    if "successor_id" in message:
        return CitedDecisionSuperseded(message)
    return None
