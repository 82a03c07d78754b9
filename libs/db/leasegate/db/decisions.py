"""Reading mint decisions: by id, by dispatch, by idempotency key."""

from __future__ import annotations

from sqlalchemy import select

from leasegate.core.records import MintDecision
from leasegate.db.convert import decision_record
from leasegate.db.engine import Database
from leasegate.db.models import MintDecisionRow
from leasegate.pg import keys as keys_pg


class DecisionRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_decision(self, decision_id: str) -> MintDecision | None:
        if self._db.dialect == "postgresql":
            return await keys_pg.get_decision(self._db.pg, decision_id)
        async with self._db.session() as session:
            row = await session.get(MintDecisionRow, decision_id)
            return decision_record(row) if row is not None else None

    async def decisions_for_dispatch(self, tenant: str, dispatch_id: str) -> list[MintDecision]:
        async with self._db.session() as session:
            rows = await session.scalars(
                select(MintDecisionRow)
                .where(MintDecisionRow.tenant == tenant, MintDecisionRow.dispatch_id == dispatch_id)
                .order_by(MintDecisionRow.created_at, MintDecisionRow.id)
            )
            return [decision_record(row) for row in rows]

    async def find_idempotent(self, tenant: str, idempotency_key: str) -> MintDecision | None:
        async with self._db.session() as session:
            row = await session.scalar(
                select(MintDecisionRow).where(
                    MintDecisionRow.tenant == tenant,
                    MintDecisionRow.idempotency_key == idempotency_key,
                )
            )
            return decision_record(row) if row is not None else None
