"""The mint's refusal once a tenant has spent its budget for the period."""

from __future__ import annotations

from leasegate.control_plane.budget_arithmetic import tenant_spent
from leasegate.control_plane.deps import OverlayVerdict
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.spend import exhausted, seconds_left
from leasegate.web.spend_totals import SpendTotals


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
