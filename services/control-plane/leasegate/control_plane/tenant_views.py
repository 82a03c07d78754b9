"""What an operator reads of the tenant budgets: each budget with this period's spend, the
fraction spent and whether it is exhausted, at the chain's revision (the API's
`GET /control/v2/tenants[/{tenant}/budget]` and the console's Spend page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from leasegate.control_plane.budget_arithmetic import spent_fraction, tenant_spent
from leasegate.control_plane.deps import OverlayReads
from leasegate.core.clock import Clock
from leasegate.spend import TenantBudget, exhausted, period_end, period_start
from leasegate.web.spend_totals import SpendTotals
from leasegate.wire import Tenant, TenantRead, Tenants, TenantSpent
from leasegate.wire import TenantBudget as TenantBudgetView


@dataclass(frozen=True, slots=True)
class TenantReads:
    """What the tenant views and the budget gauge read: the overlay's budgets, the running
    totals, the clock (the current period) and the accounts file's currency."""

    overlay: OverlayReads
    totals: SpendTotals
    clock: Clock
    currency: str | None


async def budgets_view(deps: TenantReads) -> Tenants:
    """Every budgeted tenant with its spend this period (the API's and the console's read)."""
    verdict = await deps.overlay.verdict()
    now = deps.clock.now()
    views = [
        await _budget_view(deps, tenant, budget, now)
        for tenant, budget in sorted(verdict.budgets.items())
    ]
    return Tenants(
        tenants=tuple(views),
        revision=verdict.revision,
        chain=verdict.status,
        currency=deps.currency,
    )


async def tenant_view(deps: TenantReads, tenant: str) -> TenantRead:
    """One tenant: its budget and spend, or `budget: null` when it has none."""
    verdict = await deps.overlay.verdict()
    budget = verdict.budgets.get(tenant)
    now = deps.clock.now()
    view = (
        await _budget_view(deps, tenant, budget, now)
        if budget is not None
        else Tenant(tenant=tenant, budget=None, spent=None)
    )
    return TenantRead(
        **dict(view),
        revision=verdict.revision,
        chain=verdict.status,
        currency=deps.currency,
    )


async def _budget_view(
    deps: TenantReads, tenant: str, budget: TenantBudget, now: datetime
) -> Tenant:
    spent = await tenant_spent(deps.totals, tenant, budget, now)
    return Tenant(
        tenant=tenant,
        budget=TenantBudgetView(
            period=budget.period, max_tokens=budget.max_tokens, max_cost=budget.max_cost
        ),
        spent=TenantSpent(
            period_start=period_start(now, budget.period),
            period_end=period_end(now, budget.period),
            tokens=spent.tokens,
            cost=spent.cost,
            fraction=spent_fraction(budget, spent),
            exhausted=exhausted(budget.budget, spent),
        ),
    )
