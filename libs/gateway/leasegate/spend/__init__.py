"""Spend: what a request cost and whether a budget has room. Pure: decimals, no I/O."""

from leasegate.core.vocab import PERIODS, Period
from leasegate.spend.budget import Budget, Spent, billionths, exhausted, spent_of
from leasegate.spend.period import (
    TenantBudget,
    period_end,
    period_start,
    seconds_left,
    tenant_total_id,
)
from leasegate.spend.prices import COST_QUANTUM, Prices, TokenCounts, cost_of, parse_prices

__all__ = [
    "COST_QUANTUM",
    "PERIODS",
    "Budget",
    "Period",
    "Prices",
    "Spent",
    "TenantBudget",
    "TokenCounts",
    "billionths",
    "cost_of",
    "exhausted",
    "parse_prices",
    "period_end",
    "period_start",
    "seconds_left",
    "spent_of",
    "tenant_total_id",
]
