"""A dispatch's budget and the chain's running total: when is a further request refused.

A budget bounds tokens, cost or both; a request is refused once the chain's recorded total
has *reached* either bound. The total is only known when requests finish, so requests already
in flight when the bound is crossed still finish: the overshoot is at most what those
requests spend (docs/spend.md shows the bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Budget:
    max_tokens: int | None = None
    max_cost: Decimal | None = None

    @property
    def bounded(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None


@dataclass(frozen=True, slots=True)
class Spent:
    tokens: int = 0
    cost: Decimal = Decimal(0)

    def plus(self, tokens: int, cost: Decimal | None) -> Spent:
        return Spent(self.tokens + tokens, self.cost + (cost or Decimal(0)))


_BILLION = Decimal(1_000_000_000)


def spent_of(tokens: int, cost_billionths: int) -> Spent:
    """A running total as the spend store keeps it (integers) back in the currency."""
    return Spent(tokens, Decimal(cost_billionths) / _BILLION)


def billionths(cost: Decimal | None) -> int:
    """A cost (already quantized to a billionth) as the integer the spend store adds."""
    return int((cost or Decimal(0)) * _BILLION)


def exhausted(budget: Budget, spent: Spent) -> bool:
    """Whether a further request must be refused."""
    if budget.max_tokens is not None and spent.tokens >= budget.max_tokens:
        return True
    return budget.max_cost is not None and spent.cost >= budget.max_cost
