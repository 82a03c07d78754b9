"""Spend: what a request cost and whether a budget has room. Pure: decimals, no I/O."""

from leasegate.spend.budget import Budget, Spent, exhausted
from leasegate.spend.prices import COST_QUANTUM, Prices, TokenCounts, cost_of, parse_prices

__all__ = [
    "COST_QUANTUM",
    "Budget",
    "Prices",
    "Spent",
    "TokenCounts",
    "cost_of",
    "exhausted",
    "parse_prices",
]
