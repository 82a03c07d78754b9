"""The evidence a running spend total is rebuilt from, on Postgres over a plain asyncpg pool:
sums per account of one tenant's rows in a window, or of one dispatch chain's rows since its
first decision. One statement each; `UsageRepository.spend_evidence` is the same on any
database through SQLAlchemy (`tests/contract/test_proxy_store.py` holds both to one answer)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from leasegate.core.ports.spend import AccountSpend
from leasegate.pg.pool import PgPool

# every name below is the schema's own: nothing here comes from input
_SUMS = (
    "SELECT e.account_id, coalesce(sum(e.input_tokens), 0) AS input_tokens, "
    "coalesce(sum(e.output_tokens), 0) AS output_tokens, "
    "coalesce(sum(e.cache_read_input_tokens), 0) AS cache_read, "
    "coalesce(sum(e.cache_creation_input_tokens), 0) AS cache_creation, sum(e.cost) AS cost "
    "FROM evidence e JOIN mint_decisions d ON d.id = e.mint_decision_id "
)
_TENANT = (
    _SUMS + "WHERE d.tenant = $1 AND e.started_at >= $2 AND e.started_at < $3 "
    "GROUP BY e.account_id ORDER BY e.account_id"
)
# a chain's rows all start after its first decision (whose id is the chain's): that bounds
# the partitions read
_CHAIN = (
    _SUMS + "WHERE d.chain_id = $1 AND e.started_at < $2 "  # noqa: S608
    "AND e.started_at >= (SELECT created_at FROM mint_decisions WHERE id = $1) "
    "GROUP BY e.account_id ORDER BY e.account_id"
)


async def spend_evidence(
    pool: PgPool,
    *,
    tenant: str | None,
    chain_id: str | None,
    since: datetime,
    until: datetime,
) -> list[AccountSpend]:
    async with pool.connection() as connection:
        if chain_id is not None:
            rows = await connection.fetch(_CHAIN, chain_id, until)
        else:
            rows = await connection.fetch(_TENANT, tenant, since, until)
    return [
        AccountSpend(
            account_id=row["account_id"],
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            cache_read_input_tokens=int(row["cache_read"]),
            cache_creation_input_tokens=int(row["cache_creation"]),
            cost=None if row["cost"] is None else Decimal(row["cost"]),
        )
        for row in rows
    ]
