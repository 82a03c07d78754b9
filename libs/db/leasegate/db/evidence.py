"""Terminal evidence rows: written in batches by the proxy, read newest first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import func, select

from leasegate.core.records import EvidenceRow
from leasegate.db.convert import evidence_record
from leasegate.db.engine import Database
from leasegate.db.evidence_write import write_rows
from leasegate.db.models import EvidenceRecordRow

MAX_QUERY_LIMIT = 1000

_NEWEST_FIRST = (EvidenceRecordRow.started_at.desc(), EvidenceRecordRow.request_id.desc())


class EvidenceRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def write_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        """Insert rows; one whose request_id exists is ignored, so a flush may be replayed.
        Content the database refuses raises StoreRejected (evidence_write.py)."""
        await write_rows(self._db, rows)

    async def query_evidence(
        self,
        *,
        decision_id: str | None = None,
        account_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        served_model: str | None = None,
        outcome: str | None = None,
    ) -> list[EvidenceRow]:
        """Newest first; `since` is inclusive; `limit` is clamped to 1..MAX_QUERY_LIMIT."""
        query = select(EvidenceRecordRow).order_by(*_NEWEST_FIRST)
        if decision_id is not None:
            query = query.where(EvidenceRecordRow.mint_decision_id == decision_id)
        if account_id is not None:
            query = query.where(EvidenceRecordRow.account_id == account_id)
        if served_model is not None:
            query = query.where(EvidenceRecordRow.served_model == served_model)
        if outcome is not None:
            query = query.where(EvidenceRecordRow.outcome == outcome)
        if since is not None:
            query = query.where(EvidenceRecordRow.started_at >= since)
        query = query.limit(max(1, min(limit, MAX_QUERY_LIMIT)))
        async with self._db.session() as session:
            return [evidence_record(row) for row in await session.scalars(query)]

    async def outcome_counts(self, since: datetime) -> dict[str, int]:
        """Rows per outcome that started at or after `since`; outcomes with none are absent."""
        query = (
            select(EvidenceRecordRow.outcome, func.count())
            .where(EvidenceRecordRow.started_at >= since)
            .group_by(EvidenceRecordRow.outcome)
        )
        async with self._db.session() as session:
            return {outcome: count for outcome, count in (await session.execute(query)).all()}

    async def evidence_for_decisions(
        self, decision_ids: Iterable[str]
    ) -> dict[str, list[EvidenceRow]]:
        found: dict[str, list[EvidenceRow]] = {decision_id: [] for decision_id in decision_ids}
        if not found:
            return found
        query = (
            select(EvidenceRecordRow)
            .where(EvidenceRecordRow.mint_decision_id.in_(found))
            .order_by(*_NEWEST_FIRST)
        )
        async with self._db.session() as session:
            for row in await session.scalars(query):
                if row.mint_decision_id is not None:
                    found[row.mint_decision_id].append(evidence_record(row))
        return found
