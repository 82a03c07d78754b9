"""A budgeted tenant's spend this period: the running total (rebuilt from evidence first when
the spend store lost it) and the fraction of the budget it is, for the views and the gauge."""

from __future__ import annotations

from datetime import datetime

from leasegate.spend import Spent, TenantBudget, spent_of
from leasegate.web.spend_totals import SpendTotals, tenant_total


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
