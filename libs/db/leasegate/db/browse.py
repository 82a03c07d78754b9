"""The console's browsing reads (`leasegate.core.ports.browse`) on SQLite and Postgres.

Each read is bounded: live keys through the `live_dispatch` index (only a key that may be live
holds one) with a LIMIT; recent dispatches from the latest decisions of the time range (a
LIMITed backward scan of the `created_at` index), then those dispatches' counts through
`(tenant, dispatch_id, created_at)`; traffic within a time window through `started_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    case,
    cast,
    func,
    literal_column,
    select,
    tuple_,
)

from leasegate.core.ports.browse import NOT_FAILURES, DispatchSummary, LiveKey, TrafficPoint
from leasegate.core.records import DecisionOutcome
from leasegate.db.engine import Database
from leasegate.db.keys import is_live
from leasegate.db.models import EvidenceRecordRow, KeyRow, MintDecisionRow

SCAN = 10
"""Recent dispatches come from the latest `limit * SCAN` decisions the filters keep."""

_D = MintDecisionRow
_E = EvidenceRecordRow


class BrowseRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def live_keys(
        self, now: datetime, *, tenant: str | None, account_id: str | None, limit: int
    ) -> list[LiveKey]:
        query: Any = (
            select(
                KeyRow.key_id,
                KeyRow.tenant,
                KeyRow.dispatch_id,
                KeyRow.account_id,
                KeyRow.model,
                KeyRow.served_model,
                KeyRow.created_at,
                KeyRow.expires_at,
            )
            .where(KeyRow.live_dispatch.is_not(None), is_live(now))
            .order_by(KeyRow.created_at.desc(), KeyRow.key_id)
            .limit(limit)
        )
        if tenant is not None:
            query = query.where(KeyRow.tenant == tenant)
        if account_id is not None:
            query = query.where(KeyRow.account_id == account_id)
        async with self._db.session() as session:
            rows = (await session.execute(query)).all()
        return [LiveKey(*row) for row in rows]

    async def recent_dispatches(
        self,
        since: datetime,
        until: datetime,
        *,
        tenant: str | None,
        outcome: DecisionOutcome | None,
        limit: int,
    ) -> list[DispatchSummary]:
        window = and_(_D.created_at >= since, _D.created_at < until)
        kept: list[ColumnElement[bool]] = [window]
        if tenant is not None:
            kept.append(_D.tenant == tenant)
        if outcome is not None:
            kept.append(_D.outcome == outcome)
        # 1. the dispatches of the latest decisions kept: a backward scan of the created_at
        # index (or of tenant, dispatch_id, created_at), at most `limit * SCAN` rows
        latest = (
            select(_D.tenant, _D.dispatch_id, _D.created_at)
            .where(*kept)
            .order_by(_D.created_at.desc())
            .limit(limit * SCAN)
            .subquery()
        )
        newest = func.max(latest.c.created_at)
        dispatches = (
            select(latest.c.tenant, latest.c.dispatch_id)
            .group_by(latest.c.tenant, latest.c.dispatch_id)
            .order_by(newest.desc(), latest.c.tenant, latest.c.dispatch_id)
            .limit(limit)
        )
        async with self._db.session() as session:
            pairs = [(t, d) for t, d in (await session.execute(dispatches)).all()]
            if not pairs:
                return []
            # 2. their decisions kept in the window, through (tenant, dispatch_id, created_at)
            last_at = func.max(_D.created_at)
            counts = (
                select(
                    _D.tenant,
                    _D.dispatch_id,
                    func.count(),
                    func.coalesce(func.sum(case((_D.outcome == "selected", 1), else_=0)), 0),
                    func.coalesce(func.sum(case((_D.outcome == "refused", 1), else_=0)), 0),
                    func.max(_D.hop),
                    func.min(_D.created_at),
                    last_at,
                )
                .where(tuple_(_D.tenant, _D.dispatch_id).in_(pairs), *kept)
                .group_by(_D.tenant, _D.dispatch_id)
            )
            rows = (await session.execute(counts)).all()
        found = [
            DispatchSummary(
                tenant=t,
                dispatch_id=d,
                decisions=int(n),
                selected=int(selected),
                refused=int(refused),
                max_hop=int(hop),
                first_at=first,
                last_at=last,
            )
            for t, d, n, selected, refused, hop, first, last in rows
        ]
        return sorted(found, key=lambda s: (-s.last_at.timestamp(), s.tenant, s.dispatch_id))

    async def traffic(
        self, since: datetime, until: datetime, bucket_s: int, *, account_ids: Sequence[str]
    ) -> list[TrafficPoint]:
        bucket = self._bucket(bucket_s)
        failed = case((_E.outcome.in_(NOT_FAILURES), 0), else_=1)
        query: Any = (
            select(_E.account_id, bucket, func.count(), func.coalesce(func.sum(failed), 0))
            .where(_E.started_at >= since, _E.started_at < until)
            .group_by(_E.account_id, bucket)
            .order_by(_E.account_id, bucket)
        )
        if account_ids:
            query = query.where(_E.account_id.in_(account_ids))
        async with self._db.session() as session:
            rows = (await session.execute(query)).all()
        return [
            TrafficPoint(
                account_id=account,
                start=datetime.fromtimestamp(int(n) * bucket_s, UTC),
                requests=int(requests),
                failures=int(failures),
            )
            for account, n, requests, failures in rows
        ]

    def _bucket(self, bucket_s: int) -> ColumnElement[Any]:
        """The bucket's number since the epoch, as an integer."""
        # inlined, not bound: GROUP BY must repeat the very expression the SELECT has
        width: ColumnElement[Any] = literal_column(str(int(bucket_s)))
        if self._db.dialect == "postgresql":
            seconds: ColumnElement[Any] = func.extract("epoch", _E.started_at)
            return cast(func.floor(seconds / width), Integer)
        # SQLite keeps naive UTC text: strftime('%s') reads it as UTC seconds
        return cast(func.strftime("%s", _E.started_at), Integer) // width  # integer division
