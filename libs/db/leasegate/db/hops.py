"""The two reads a hop needs beyond the decision itself: the cited decision's evidence, summed
up, and whether its dispatch still holds a live lease."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from leasegate.core.ports.storage import EvidenceSummary
from leasegate.db.engine import Database
from leasegate.db.models import EvidenceRecordRow, KeyRow, live_dispatch_of


class HopRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def evidence_summary(self, decision_id: str) -> EvidenceSummary:
        """Whether any terminal row exists, the earliest qualifying one's request id and the
        earliest context-length-exceeded one's.

        Three indexed point queries rather than loading every row: a long dispatch may have
        made thousands of requests on one key.
        """
        of_decision = EvidenceRecordRow.mint_decision_id == decision_id
        async with self._db.session() as session:
            any_row = await session.scalar(
                select(EvidenceRecordRow.request_id).where(of_decision).limit(1)
            )
            qualifying = await session.scalar(
                select(EvidenceRecordRow.request_id)
                .where(of_decision, EvidenceRecordRow.qualifying.is_(True))
                .order_by(EvidenceRecordRow.started_at, EvidenceRecordRow.request_id)
                .limit(1)
            )
            context_length = await session.scalar(
                select(EvidenceRecordRow.request_id)
                .where(of_decision, EvidenceRecordRow.outcome == "context-length-exceeded")
                .order_by(EvidenceRecordRow.started_at, EvidenceRecordRow.request_id)
                .limit(1)
            )
        return EvidenceSummary(
            has_terminal=any_row is not None,
            qualifying_request_id=qualifying,
            context_length_request_id=context_length,
        )

    async def live_key_of_dispatch(
        self, tenant: str, dispatch_id: str, now: datetime
    ) -> str | None:
        """The key holding this dispatch's one live lease, if any (the UNIQUE live_dispatch
        column is what guarantees there is at most one; this only reads it)."""
        async with self._db.session() as session:
            found: str | None = await session.scalar(
                select(KeyRow.key_id).where(
                    KeyRow.live_dispatch == live_dispatch_of(tenant, dispatch_id),
                    KeyRow.revoked_at.is_(None),
                    KeyRow.expires_at > now,
                )
            )
            return found
