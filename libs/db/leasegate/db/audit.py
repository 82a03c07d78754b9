"""The audit chain's storage: consistent reads, and appends serialised by the database.

Reads take one snapshot (REPEATABLE READ on Postgres; on SQLite every transaction already holds
the database lock), so a chain and its anchor are never seen from two different moments.
An append locks the anchor row (SELECT ... FOR UPDATE) before it reads, so concurrent writers,
in any number of processes, queue in the database and each decides from what the one before
it committed. The very first append has no anchor row to lock; two first writers then collide
on the records' primary key, and the loser's whole transaction (its revocations included) is
rolled back and reported as ChainRaced.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from leasegate.audit import Anchor, AuditRecord
from leasegate.audit.appends import ChainRaced, Prepare
from leasegate.audit.reads import ChainHead, ChainSnapshot
from leasegate.core.records import KeyRecord
from leasegate.db.audit_lock import lock_for_mutation
from leasegate.db.engine import Database
from leasegate.db.keys import end_account_keys
from leasegate.db.models import ANCHOR_ID, AuditAnchorRow, AuditRecordRow
from leasegate.pg.rows import anchor_of_row, record_of_row

_RECORDS = AuditRecordRow.__table__
_ANCHOR = AuditAnchorRow.__table__

REVOKE_REASON = "account-disabled"

__all__ = ["REVOKE_REASON", "AuditRepository"]


class AuditRepository:
    """The audit chain's port (`leasegate.audit.appends.AuditChain`) over the database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def read_chain(self) -> ChainSnapshot:
        """One snapshot of the chain (run again on a fresh connection if the first is lost)."""
        return await self._db.read(_chain)

    async def read_head(self) -> ChainHead:
        return await self._db.read(_head)

    async def append(self, prepare: Prepare, now: datetime) -> tuple[AuditRecord, list[KeyRecord]]:
        """Lock, read, `prepare`, revoke (disable only), append, re-anchor: one transaction.

        Revocation comes after the revision check and before the append: a stale request
        revokes nothing, and no record claims a revocation that did not happen.
        """
        async with self._db.session(_raced) as session:
            await lock_for_mutation(session, self._db.dialect)
            snapshot = await _locked_chain(session)
            plan = prepare(snapshot)
            ended: list[KeyRecord] = []
            if plan.revoke_account is not None:
                ended = await end_account_keys(session, plan.revoke_account, REVOKE_REASON, now)
            record, anchor = plan.seal(len(ended))
            await session.execute(insert(AuditRecordRow).values(_values(record)))
            await self._put_anchor(session, anchor)
            return record, ended

    async def _put_anchor(self, session: AsyncSession, anchor: Anchor) -> None:
        dialect = postgresql if self._db.dialect == "postgresql" else sqlite
        values = {
            "count": anchor.count,
            "head_hash": anchor.head_hash,
            "signature": anchor.signature,
        }
        await session.execute(
            dialect.insert(AuditAnchorRow)
            .values(id=ANCHOR_ID, **values)
            .on_conflict_do_update(index_elements=[AuditAnchorRow.id], set_=values)
        )


async def _chain(connection: AsyncConnection) -> ChainSnapshot:
    anchor = (await connection.execute(select(_ANCHOR))).first()
    rows = await connection.execute(select(_RECORDS).order_by(_RECORDS.c.seq))
    return ChainSnapshot(tuple(_record(row) for row in rows), _anchor(anchor))


async def _head(connection: AsyncConnection) -> ChainHead:
    anchor = (await connection.execute(select(_ANCHOR))).first()
    count = await connection.scalar(select(func.count()).select_from(_RECORDS))
    last = await connection.scalar(select(_RECORDS.c.hash).order_by(_RECORDS.c.seq.desc()).limit(1))
    return ChainHead(count or 0, last, _anchor(anchor))


def _raced(exc: DBAPIError) -> Exception | None:
    """Two first writers collided on the records' primary key: the loser raced."""
    if isinstance(exc, IntegrityError) and "audit" in str(exc.orig):
        return ChainRaced(str(exc.orig))
    return None


async def _locked_chain(session: AsyncSession) -> ChainSnapshot:
    # FOR UPDATE is Postgres' row lock; SQLite renders none and is serialised by BEGIN IMMEDIATE
    anchor = (
        await session.execute(select(_ANCHOR).where(_ANCHOR.c.id == ANCHOR_ID).with_for_update())
    ).first()
    rows = await session.execute(select(_RECORDS).order_by(_RECORDS.c.seq))
    return ChainSnapshot(tuple(_record(row) for row in rows), _anchor(anchor))


def _record(row: Row[Any]) -> AuditRecord:
    return record_of_row(dict(row._mapping))


def _anchor(row: Row[Any] | None) -> Anchor | None:
    # `count` is also a tuple method on Row: read the columns by name
    return anchor_of_row(dict(row._mapping) if row is not None else None)


def _values(record: AuditRecord) -> dict[str, object]:
    """The record's columns: the table's are named as the record's fields."""
    return asdict(record)
