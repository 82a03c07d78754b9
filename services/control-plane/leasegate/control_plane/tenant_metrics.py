"""Each budgeted tenant's spend fraction, read from the shared spend store on every scrape.

One series per budgeted tenant (bounded by the operators' budgets, never by traffic); a tenant
whose budget is cleared loses its series at the next scrape. The value is the larger of
tokens/max_tokens and cost/max_cost for the current UTC period: 1 or more means exhausted.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Gauge

from leasegate.control_plane.budget_arithmetic import spent_fraction, tenant_spent
from leasegate.control_plane.tenant_views import TenantReads
from leasegate.core.ports.errors import StoreError

log = logging.getLogger("leasegate.control_plane.metrics")


class TenantBudgetGauges:
    def __init__(self, deps: TenantReads, registry: CollectorRegistry) -> None:
        self._deps = deps
        self.fraction = Gauge(
            "leasegate_tenant_budget_spent_fraction",
            "A budgeted tenant's spend in the current UTC period over its budget (1 = reached).",
            ["tenant", "period"],
            registry=registry,
        )

    async def refresh(self) -> None:
        deps = self._deps
        now = deps.clock.now()
        try:
            verdict = await deps.overlay.verdict()
            fractions = {
                (tenant, budget.period): spent_fraction(
                    budget, await tenant_spent(deps.totals, tenant, budget, now)
                )
                for tenant, budget in verdict.budgets.items()
            }
        except StoreError as exc:
            log.warning("tenant budget gauges not refreshed", extra={"error": exc.reason})
            self.fraction.clear()
            return
        self.fraction.clear()
        for (tenant, period), fraction in fractions.items():
            self.fraction.labels(tenant, period).set(fraction)
