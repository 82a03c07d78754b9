"""A request's cost, and the budgets it spends against: its dispatch's (the chain's running
total) and its tenant's per period. Refused once a total has reached its budget.

The check reads each running total that applies (one store call each, only for keys that
carry a budget and tenants that have one); a total the store does not know (lost with Redis's
data) is rebuilt from evidence before the request is admitted (`SpendTotals`). Each finished
request adds its tokens and cost to both. Requests already in flight when a total crosses its
budget still finish, so a chain or a tenant overshoots by at most what those requests spend
(docs/spend.md).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.records import KeyRecord
from leasegate.providers import Usage
from leasegate.proxy.tenant_budgets import TenantBudgetWatch
from leasegate.spend import (
    Budget,
    TenantBudget,
    TokenCounts,
    billionths,
    cost_of,
    exhausted,
    seconds_left,
    spent_of,
)
from leasegate.web.spend_totals import SpendTotals, TotalRef, chain_total, tenant_total


class SpendGate:
    def __init__(
        self,
        registry: Registry,
        totals: SpendTotals,
        keep_s: float,
        tenants: TenantBudgetWatch | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._registry = registry
        self._totals = totals
        self._keep_s = keep_s
        """How long a chain's total is kept after its last request (the longest key life)."""
        self._tenants = tenants
        self._clock = clock

    def cost(self, key: KeyRecord | None, usage: Usage) -> Decimal | None:
        if key is None:
            return None
        account = self._registry.account(key.account_id)
        if account is None:
            return None
        return cost_of(_counts(usage, account.input_includes_cache), account.prices.get(key.model))

    async def check(self, key: KeyRecord, started_at: datetime) -> None:
        """Refuse once a total has reached its budget; `started_at`: the request's (a total
        rebuilt for it counts the requests started from then on)."""
        await self._check_dispatch(key, started_at)
        await self._check_tenant(key, started_at)

    async def _check_dispatch(self, key: KeyRecord, started_at: datetime) -> None:
        budget = _budget(key)
        if budget is None or key.chain_id is None:
            return
        tokens, cost = await self._totals.spent(self._chain(key.chain_id), started_at)
        if exhausted(budget, spent_of(tokens, cost)):
            raise GatewayError("dispatch-budget-exhausted", "this dispatch has spent its budget")

    async def _check_tenant(self, key: KeyRecord, started_at: datetime) -> None:
        if self._tenants is None:
            return
        tenant = await self._tenants.budget_of(key.tenant)  # fails closed: budgets-unverifiable
        if tenant is None:
            return
        now = self._now()
        ref = tenant_total(key.tenant, tenant, now)
        tokens, cost = await self._totals.spent(ref, min(started_at, now))
        if exhausted(tenant.budget, spent_of(tokens, cost)):
            raise GatewayError(
                "tenant-budget-exhausted",
                f"this tenant has spent its budget for the {tenant.period}",
                retry_after_s=seconds_left(now, tenant.period),
            )

    async def record(
        self, key: KeyRecord | None, usage: Usage, cost: Decimal | None, started_at: datetime
    ) -> None:
        """Add a finished request (its evidence row started at `started_at`) to its chain's
        total and its tenant's total for the period it started in, as /usage counts it."""
        if key is None:
            return
        account = self._registry.account(key.account_id)
        includes_cache = account.input_includes_cache if account is not None else False
        tokens = _counts(usage, includes_cache).total
        amount = billionths(cost)
        if not (tokens or amount):
            return
        if key.chain_id is not None and _budget(key) is not None:
            await self._totals.add(self._chain(key.chain_id), tokens, amount, started_at)
        tenant = await self._tenant_budget(key)
        if tenant is not None:
            ref = tenant_total(key.tenant, tenant, started_at)
            await self._totals.add(ref, tokens, amount, started_at)

    def _chain(self, chain_id: str) -> TotalRef:
        return chain_total(chain_id, self._keep_s)

    async def _tenant_budget(self, key: KeyRecord) -> TenantBudget | None:
        if self._tenants is None:
            return None
        return (await self._tenants.budgets()).get(key.tenant)

    def _now(self) -> datetime:
        if self._clock is None:
            raise RuntimeError("a SpendGate with tenant budgets needs a clock")
        return self._clock.now()


def _budget(key: KeyRecord) -> Budget | None:
    budget = Budget(key.budget_max_tokens, key.budget_max_cost)
    return budget if budget.bounded else None


def _counts(usage: Usage, input_includes_cache: bool) -> TokenCounts:
    return TokenCounts(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        input_includes_cache=input_includes_cache,
    )
