"""Usage: tokens, cost and request counts summed from evidence, grouped as the caller asks.

One GROUP BY over the evidence rows of a time window (the `started_at` index bounds it),
joined to `mint_decisions` only when grouping by tenant (a row knows its decision, the decision
knows its tenant). Groups come back in key order, a page at a time: the port
`leasegate.core.ports.usage.UsageReader`, and `budgeted_live_chains` the spend reconciler's
`leasegate.core.ports.spend.BudgetedChains`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, case, func, select

from leasegate.core.ports.spend import AccountSpend
from leasegate.core.ports.usage import Grouping, UsageGroup
from leasegate.db.engine import Database
from leasegate.db.models import EvidenceRecordRow, KeyRow, MintDecisionRow
from leasegate.pg import spend_evidence as spend_evidence_pg

_E = EvidenceRecordRow


class UsageRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def usage(
        self,
        since: datetime,
        until: datetime,
        group_by: Sequence[Grouping],
        *,
        limit: int,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[UsageGroup]:
        """`tenant`, when given, keeps only the rows of that tenant's decisions."""
        columns = {name: self._group_column(name) for name in group_by}
        query: Any = select(
            *(column.label(name) for name, column in columns.items()),
            func.count().label("requests"),
            func.coalesce(func.sum(_E.input_tokens), 0).label("input_tokens"),
            func.coalesce(func.sum(_E.output_tokens), 0).label("output_tokens"),
            func.coalesce(func.sum(_E.cache_read_input_tokens), 0).label("cache_read"),
            func.coalesce(func.sum(_E.cache_creation_input_tokens), 0).label("cache_creation"),
            func.sum(_E.cost).label("cost"),
            func.coalesce(func.sum(case((_E.usage_estimated, 1), else_=0)), 0).label("estimated"),
        ).where(_E.started_at >= since, _E.started_at < until)
        if "tenant" in columns or tenant is not None:
            query = query.select_from(_E).outerjoin(
                MintDecisionRow, MintDecisionRow.id == _E.mint_decision_id
            )
        if tenant is not None:
            query = query.where(MintDecisionRow.tenant == tenant)
        if columns:
            query = query.group_by(*columns.values()).order_by(*columns.values())
        query = query.limit(limit).offset(offset)
        async with self._db.session() as session:
            rows = (await session.execute(query)).all()
        return [
            UsageGroup(
                keys={name: _text(getattr(row, name)) for name in columns},
                requests=int(row.requests),
                input_tokens=int(row.input_tokens),
                output_tokens=int(row.output_tokens),
                cache_read_input_tokens=int(row.cache_read),
                cache_creation_input_tokens=int(row.cache_creation),
                cost=None if row.cost is None else Decimal(row.cost),
                estimated_requests=int(row.estimated),
            )
            for row in rows
        ]

    async def spend_evidence(
        self, *, tenant: str | None, chain_id: str | None, since: datetime, until: datetime
    ) -> list[AccountSpend]:
        """Sums per account of one tenant's rows started in `[since, until)`, or of one
        dispatch chain's rows since its first decision (`SpendEvidence`). On Postgres the
        asyncpg statement a production proxy runs (a tenth of the ORM's time)."""
        if self._db.dialect == "postgresql":
            return await spend_evidence_pg.spend_evidence(
                self._db.pg, tenant=tenant, chain_id=chain_id, since=since, until=until
            )
        decision = MintDecisionRow
        query: Any = (
            select(
                _E.account_id,
                func.coalesce(func.sum(_E.input_tokens), 0),
                func.coalesce(func.sum(_E.output_tokens), 0),
                func.coalesce(func.sum(_E.cache_read_input_tokens), 0),
                func.coalesce(func.sum(_E.cache_creation_input_tokens), 0),
                func.sum(_E.cost),
            )
            .select_from(_E)
            .join(decision, decision.id == _E.mint_decision_id)
            .where(_E.started_at < until)
            .group_by(_E.account_id)
            .order_by(_E.account_id)
        )
        if chain_id is not None:
            first = select(decision.created_at).where(decision.id == chain_id).scalar_subquery()
            query = query.where(decision.chain_id == chain_id, _E.started_at >= first)
        else:
            query = query.where(decision.tenant == tenant, _E.started_at >= since)
        async with self._db.session() as session:
            rows = (await session.execute(query)).all()
        return [
            AccountSpend(
                account_id=account,
                input_tokens=int(inputs),
                output_tokens=int(outputs),
                cache_read_input_tokens=int(reads),
                cache_creation_input_tokens=int(writes),
                cost=None if cost is None else Decimal(cost),
            )
            for account, inputs, outputs, reads, writes, cost in rows
        ]

    async def budgeted_live_chains(self, now: datetime) -> list[str]:
        """The chains of the live keys that carry a dispatch budget: whose totals matter."""
        query = (
            select(KeyRow.chain_id)
            .where(
                # a live key carries `live_dispatch` (UNIQUE, NULL once ended): its index keeps
                # this from reading every key ever minted
                KeyRow.live_dispatch.is_not(None),
                KeyRow.revoked_at.is_(None),
                KeyRow.expires_at > now,
                KeyRow.chain_id.is_not(None),
                (KeyRow.budget_max_tokens.is_not(None)) | (KeyRow.budget_max_cost.is_not(None)),
            )
            .distinct()
        )
        async with self._db.session() as session:
            return [c for c in (await session.execute(query)).scalars() if c is not None]

    def _group_column(self, name: Grouping) -> ColumnElement[Any]:
        if name == "tenant":
            return MintDecisionRow.tenant.expression
        if name == "account":
            return _E.account_id.expression
        if name == "model":
            return _E.requested_model.expression
        if self._db.dialect == "postgresql":
            return func.to_char(func.timezone("UTC", _E.started_at), "YYYY-MM-DD")
        return func.substr(_E.started_at, 1, 10)  # SQLite stores naive UTC as ISO text


def _text(value: object) -> str | None:
    return None if value is None else str(value)
