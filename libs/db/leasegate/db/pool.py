"""A mint's reads about its pool beyond health and lease counts: the account that last served
an affinity, and who holds and who wants the pool's leases (fair shares); and the lease-rate
meter's two reads (what each (account, served model) was sent by requests that ended in a
window, and its live leases).

On Postgres each is one prepared statement on the plain asyncpg pool (`Database.pg`), one round
trip; SQLite goes through the ORM. Both keep the contract in `tests/contract/test_mint_store.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from leasegate.core.ports.storage import LONGEST_REQUEST_COUNTED_S, PairSpend, PoolDemand
from leasegate.db.engine import Database
from leasegate.db.keys import is_live
from leasegate.db.models import EvidenceRecordRow, KeyRow, MintDecisionRow

STARVED_CODE = "no-eligible-account"

_AFFINITY_ACCOUNT = (
    "SELECT account_id FROM mint_decisions WHERE tenant = $1 AND model = $2 AND affinity = $3 "
    "AND created_at >= $4 AND outcome = 'selected' ORDER BY created_at DESC, id DESC LIMIT 1"
)
POOL_DEMAND = (
    "SELECT 'held' AS kind, tenant, count(*)::float8 AS n FROM keys "
    "WHERE account_id = ANY($1::text[]) AND revoked_at IS NULL AND expires_at > $4 "
    "GROUP BY tenant "
    "UNION ALL SELECT DISTINCT 'starved', tenant, 0::float8 FROM mint_decisions "
    "WHERE refusal_code = 'no-eligible-account' AND model = $2 AND created_at >= $3 "
    "UNION ALL SELECT 'spent', k.tenant, "
    "sum(coalesce(e.input_tokens, 0) + coalesce(e.output_tokens, 0))::float8 "
    "FROM evidence e JOIN keys k ON k.key_id = e.key_id "
    "WHERE e.started_at >= $5 AND e.started_at <= $4 "
    "AND e.account_id = ANY($1::text[]) GROUP BY k.tenant"
)
"""The refused part reads `ix_mint_decisions_starved`, whose predicate is this `refusal_code`;
the spent part the evidence's `started_at` index (and only the day partitions it touches)."""
QUOTA_REFUSAL = "account-quota-exhausted"
_SPEND_BY_PAIR = (
    "SELECT account_id, served_model, count(upstream_status)::int, "
    "coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint, "
    "(coalesce(sum(retry_after_ms) FILTER (WHERE refusal_reason = $4), 0) / 1000.0)::float8 "
    "FROM evidence WHERE started_at >= $1 AND started_at < $3 "
    "AND started_at + duration_ms * interval '1 millisecond' >= $2 "
    "AND started_at + duration_ms * interval '1 millisecond' < $3 "
    "AND account_id IS NOT NULL AND served_model IS NOT NULL GROUP BY account_id, served_model"
)
"""Requests that ended in [$2, $3): the range on `started_at` ($1: the window's start less
`LONGEST_REQUEST_COUNTED_S`) reads the index and the day partitions it touches; $4 is
`QUOTA_REFUSAL`, whose `Retry-After`s are the leases' waits."""


async def _spent_orm(
    session: AsyncSession, accounts: list[str], since: datetime, now: datetime
) -> dict[str, float]:
    row = EvidenceRecordRow
    tokens = func.coalesce(row.input_tokens, 0) + func.coalesce(row.output_tokens, 0)
    summed = await session.execute(
        select(KeyRow.tenant, func.sum(tokens))
        .join(KeyRow, KeyRow.key_id == row.key_id)
        .where(row.account_id.in_(accounts), row.started_at >= since, row.started_at <= now)
        .group_by(KeyRow.tenant)
    )
    return {tenant: float(n) for tenant, n in summed if n}


class PoolRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def affinity_account(
        self, tenant: str, model: str, affinity: str, since: datetime
    ) -> str | None:
        if self._db.dialect == "postgresql":
            async with self._db.pg.connection() as connection:
                found: str | None = await connection.fetchval(
                    _AFFINITY_ACCOUNT, tenant, model, affinity, since
                )
            return found
        async with self._db.session() as session:
            return await session.scalar(
                select(MintDecisionRow.account_id)
                .where(
                    MintDecisionRow.tenant == tenant,
                    MintDecisionRow.model == model,
                    MintDecisionRow.affinity == affinity,
                    MintDecisionRow.created_at >= since,
                    MintDecisionRow.outcome == "selected",
                )
                .order_by(MintDecisionRow.created_at.desc(), MintDecisionRow.id.desc())
                .limit(1)
            )

    async def pool_demand(
        self,
        account_ids: Iterable[str],
        model: str,
        since: datetime,
        now: datetime,
        spent_since: datetime,
    ) -> PoolDemand:
        accounts = list(account_ids)
        held: dict[str, int] = {}
        starved: set[str] = set()
        spent: dict[str, float] = {}
        if self._db.dialect == "postgresql":
            async with self._db.pg.connection() as connection:
                rows = await connection.fetch(POOL_DEMAND, accounts, model, since, now, spent_since)
            for kind, tenant, n in rows:
                if kind == "starved":
                    starved.add(tenant)
                elif kind == "held":
                    held[tenant] = int(n)
                elif n > 0:
                    spent[tenant] = n
            return PoolDemand(held, frozenset(starved), spent)
        async with self._db.session() as session:
            if accounts:
                counted = await session.execute(
                    select(KeyRow.tenant, func.count())
                    .where(KeyRow.account_id.in_(accounts), is_live(now))
                    .group_by(KeyRow.tenant)
                )
                held = {tenant: count for tenant, count in counted}
            refused = await session.scalars(
                select(MintDecisionRow.tenant)
                .where(
                    MintDecisionRow.refusal_code == STARVED_CODE,
                    MintDecisionRow.model == model,
                    MintDecisionRow.created_at >= since,
                )
                .distinct()
            )
            starved = set(refused)
            if accounts:
                spent = await _spent_orm(session, accounts, spent_since, now)
        return PoolDemand(held, frozenset(starved), spent)

    async def spend_by_pair(self, since: datetime, until: datetime) -> list[PairSpend]:
        earliest = since - timedelta(seconds=LONGEST_REQUEST_COUNTED_S)
        if self._db.dialect == "postgresql":
            async with self._db.pg.connection() as connection:
                found = await connection.fetch(
                    _SPEND_BY_PAIR, earliest, since, until, QUOTA_REFUSAL
                )
            return [PairSpend(*row) for row in found]
        return await self._spend_by_pair_orm(earliest, since, until)

    async def _spend_by_pair_orm(
        self, earliest: datetime, since: datetime, until: datetime
    ) -> list[PairSpend]:
        """SQLite (embedded, one process): the window's candidate rows, ended and summed here
        (SQLite has no interval arithmetic on the stored instants)."""
        row = EvidenceRecordRow
        async with self._db.session() as session:
            found = await session.execute(
                select(
                    row.account_id,
                    row.served_model,
                    row.started_at,
                    row.duration_ms,
                    row.upstream_status,
                    row.input_tokens,
                    row.output_tokens,
                    row.refusal_reason,
                    row.retry_after_ms,
                ).where(
                    row.started_at >= earliest,
                    row.started_at < until,
                    row.account_id.is_not(None),
                    row.served_model.is_not(None),
                )
            )
            sums: dict[tuple[str, str], list[float]] = {}
            for r in found:
                if not since <= r.started_at + timedelta(milliseconds=r.duration_ms) < until:
                    continue
                total = sums.setdefault((str(r.account_id), str(r.served_model)), [0, 0, 0, 0.0])
                total[0] += r.upstream_status is not None
                total[1] += r.input_tokens or 0
                total[2] += r.output_tokens or 0
                if r.refusal_reason == QUOTA_REFUSAL:
                    total[3] += (r.retry_after_ms or 0.0) / 1000
        return [
            PairSpend(account, model, int(sent), int(inputs), int(outputs), waited)
            for (account, model), (sent, inputs, outputs, waited) in sums.items()
        ]

    async def live_leases_by_pair(
        self, account_ids: Iterable[str], now: datetime
    ) -> dict[tuple[str, str], int]:
        accounts = list(account_ids)
        if not accounts:
            return {}
        async with self._db.session() as session:
            found = await session.execute(
                select(KeyRow.account_id, KeyRow.served_model, func.count())
                .where(KeyRow.account_id.in_(accounts), is_live(now))
                .group_by(KeyRow.account_id, KeyRow.served_model)
            )
            return {(account, model): count for account, model, count in found}
