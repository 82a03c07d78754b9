"""Tenant budgets per period: set or cleared by operators on the audit chain, read back with
the tenant's running total, and the mint's refusal once a tenant has spent its budget.

    POST /control/v2/tenants/{tenant}/budget   admin tokens only; body `TenantBudgetBody`
    GET  /control/v2/tenants/{tenant}/budget   the budget (or null) and this period's spend
                                               (a tenant may contain `/`: `acme/web`)
    GET  /control/v2/tenants                   every budgeted tenant, with its spend

The running total is the spend store's (Redis in production), added to by the proxies as each
request of a budgeted tenant finishes, one total per tenant and UTC period; rebuilt from
evidence when the store lost it, and brought back to evidence by `SpendReconciler`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Header, Path, Request

from leasegate.control_plane.callers import admin_caller
from leasegate.control_plane.deps import OverlayVerdict
from leasegate.control_plane.overlay import BudgetChange
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ids import DISPATCH_PART_PATTERN
from leasegate.spend import (
    Spent,
    TenantBudget,
    exhausted,
    period_end,
    period_start,
    seconds_left,
    spent_of,
)
from leasegate.web.spend_totals import SpendTotals, tenant_total
from leasegate.wire import (
    Tenant,
    TenantBudgetBody,
    TenantBudgetChanged,
    TenantBudgetRecord,
    TenantRead,
    Tenants,
    TenantSpent,
)
from leasegate.wire import TenantBudget as TenantBudgetView

if TYPE_CHECKING:  # the runtime module imports the overlay, which this module also uses
    from leasegate.control_plane.runtime import ControlRuntime

TenantPath = Annotated[str, Path(pattern=DISPATCH_PART_PATTERN)]


def tenants_router(runtime: ControlRuntime) -> APIRouter:
    admin = admin_caller(runtime)
    router = APIRouter()

    @router.post("/tenants/{tenant:path}/budget", dependencies=[Depends(admin)])
    async def set_budget(
        tenant: TenantPath,
        body: TenantBudgetBody,
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
    ) -> TenantBudgetChanged:
        caller = await admin(request, authorization)
        change = BudgetChange(
            budget=body.fields(tenant),
            expected_revision=body.expected_revision,
            reason=body.reason,
            actor=caller.name,
            on_behalf_of=body.on_behalf_of,
        )
        record, _ = await runtime.overlay.mutate(change)
        await runtime.reconciler.budget_set(tenant)
        view = await tenant_view(runtime, tenant)
        appended = TenantBudgetRecord.model_validate(record, from_attributes=True)
        return TenantBudgetChanged(**dict(view), record=appended)

    @router.get("/tenants/{tenant:path}/budget")
    async def read_budget(tenant: TenantPath) -> TenantRead:
        return await tenant_view(runtime, tenant)

    @router.get("/tenants")
    async def list_budgets() -> Tenants:
        return await budgets_view(runtime)

    return router


async def budgets_view(runtime: ControlRuntime) -> Tenants:
    """Every budgeted tenant with its spend this period (the API's and the console's read)."""
    verdict = await runtime.overlay.verdict()
    now = runtime.clock.now()
    views = [
        await _budget_view(runtime, tenant, budget, now)
        for tenant, budget in sorted(verdict.budgets.items())
    ]
    return Tenants(
        tenants=tuple(views),
        revision=verdict.revision,
        chain=verdict.status,
        currency=runtime.registry.currency,
    )


async def tenant_view(runtime: ControlRuntime, tenant: str) -> TenantRead:
    verdict = await runtime.overlay.verdict()
    budget = verdict.budgets.get(tenant)
    now = runtime.clock.now()
    view = (
        await _budget_view(runtime, tenant, budget, now)
        if budget is not None
        else Tenant(tenant=tenant, budget=None, spent=None)
    )
    return TenantRead(
        **dict(view),
        revision=verdict.revision,
        chain=verdict.status,
        currency=runtime.registry.currency,
    )


async def _budget_view(
    runtime: ControlRuntime, tenant: str, budget: TenantBudget, now: datetime
) -> Tenant:
    spent = await tenant_spent(runtime.totals, tenant, budget, now)
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


def spent_fraction(budget: TenantBudget, spent: Spent) -> float:
    """The larger of tokens/max_tokens and cost/max_cost: 1.0 or more means exhausted. A
    float, for display and the gauge only; refusals compare exact integers and decimals."""
    fractions = [0.0]
    if budget.max_tokens:
        fractions.append(spent.tokens / budget.max_tokens)
    if budget.max_cost:
        fractions.append(float(spent.cost / budget.max_cost))
    return max(fractions)


async def tenant_spent(
    totals: SpendTotals, tenant: str, budget: TenantBudget, now: datetime
) -> Spent:
    """This period's total, rebuilt from evidence first if the spend store lost it."""
    tokens, cost = await totals.spent(tenant_total(tenant, budget, now))
    return spent_of(tokens, cost)


async def tenant_budget_refusal(
    overlay: OverlayVerdict, spend: SpendTotals, clock: Clock, tenant: str
) -> GatewayError | None:
    """`tenant-budget-exhausted` (held until the period ends) when the tenant's spend in the
    current period has reached its budget; None otherwise. From the overlay's cached fold,
    like the account states the same mint decides with."""
    budget = (await overlay.decided()).budgets.get(tenant)
    if budget is None:
        return None
    now = clock.now()
    spent = await tenant_spent(spend, tenant, budget, now)
    if not exhausted(budget.budget, spent):
        return None
    return GatewayError(
        "tenant-budget-exhausted",
        f"this tenant has spent its budget for the {budget.period}",
        retry_after_s=seconds_left(now, budget.period),
    )
