"""Tenant budgets per period, the HTTP surface: set or cleared by operators on the audit
chain, read back with the tenant's running total (`tenant_views`). The arithmetic is
`budget_arithmetic`, the mint's refusal once a tenant has spent its budget `budget_refusal`.

    POST /control/v2/tenants/{tenant}/budget   admin tokens only; body `TenantBudgetBody`
    GET  /control/v2/tenants/{tenant}/budget   the budget (or null) and this period's spend
                                               (a tenant may contain `/`: `acme/web`)
    GET  /control/v2/tenants                   every budgeted tenant, with its spend

The running total is the spend store's (Redis in production), added to by the proxies as each
request of a budgeted tenant finishes, one total per tenant and UTC period; rebuilt from
evidence when the store lost it, and brought back to evidence by `SpendReconciler`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Request

from leasegate.control_plane.budget_change import change_budget
from leasegate.control_plane.callers import Callers, admin_caller
from leasegate.control_plane.overlay import AdminOverlay
from leasegate.control_plane.spend_reconcile import SpendReconciler
from leasegate.control_plane.tenant_views import TenantReads, budgets_view, tenant_view
from leasegate.core.ids import DISPATCH_PART_PATTERN
from leasegate.wire import (
    TenantBudgetBody,
    TenantBudgetChanged,
    TenantBudgetRecord,
    TenantRead,
    Tenants,
)

TenantPath = Annotated[str, Path(pattern=DISPATCH_PART_PATTERN)]


@dataclass(frozen=True, slots=True)
class TenantDeps:
    """What the tenants' routes use: who may call, the overlay a budget change is appended
    to, the reconciler that brings the tenant's total up to date, and the views' reads."""

    callers: Callers
    overlay: AdminOverlay
    reconciler: SpendReconciler
    reads: TenantReads


def tenants_router(deps: TenantDeps) -> APIRouter:
    admin = admin_caller(deps.callers)
    router = APIRouter()

    @router.post("/tenants/{tenant:path}/budget", dependencies=[Depends(admin)])
    async def set_budget(
        tenant: TenantPath,
        body: TenantBudgetBody,
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
    ) -> TenantBudgetChanged:
        caller = await admin(request, authorization)
        record = await change_budget(deps.overlay, deps.reconciler, tenant, body, caller.name)
        view = await tenant_view(deps.reads, tenant)
        appended = TenantBudgetRecord.model_validate(record, from_attributes=True)
        return TenantBudgetChanged(**dict(view), record=appended)

    @router.get("/tenants/{tenant:path}/budget")
    async def read_budget(tenant: TenantPath) -> TenantRead:
        return await tenant_view(deps.reads, tenant)

    @router.get("/tenants")
    async def list_budgets() -> Tenants:
        return await budgets_view(deps.reads)

    return router
