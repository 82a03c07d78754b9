"""A request's cost, and its dispatch's budget: refused once the chain's total has reached it.

The check reads the chain's running total (one store call, only for keys that carry a budget);
each finished request adds its tokens and cost. Requests already in flight when the total
crosses the budget still finish, so a chain overshoots by at most what those requests spend
(docs/spend.md).
"""

from __future__ import annotations

from decimal import Decimal

from leasegate.accounts import Registry
from leasegate.core.errors import GatewayError
from leasegate.core.ports.spend import ChainSpend
from leasegate.core.records import KeyRecord
from leasegate.spend import COST_QUANTUM, Budget, Spent, TokenCounts, cost_of, exhausted
from leasegate.upstream.sse import Usage

_BILLION = Decimal(1) / COST_QUANTUM


class SpendGate:
    def __init__(self, registry: Registry, store: ChainSpend, keep_s: float) -> None:
        self._registry = registry
        self._store = store
        self._keep_s = keep_s
        """How long a chain's total is kept after its last request (the longest key life)."""

    def cost(self, key: KeyRecord | None, usage: Usage) -> Decimal | None:
        if key is None:
            return None
        account = self._registry.account(key.account_id)
        if account is None:
            return None
        return cost_of(_counts(usage, account.input_includes_cache), account.prices.get(key.model))

    async def check(self, key: KeyRecord) -> None:
        budget = _budget(key)
        if budget is None or key.chain_id is None:
            return
        tokens, billionths = await self._store.spent(key.chain_id)
        if exhausted(budget, Spent(tokens, Decimal(billionths) / _BILLION)):
            raise GatewayError("dispatch-budget-exhausted", "this dispatch has spent its budget")

    async def record(self, key: KeyRecord | None, usage: Usage, cost: Decimal | None) -> None:
        if key is None or key.chain_id is None or _budget(key) is None:
            return
        account = self._registry.account(key.account_id)
        includes_cache = account.input_includes_cache if account is not None else False
        tokens = _counts(usage, includes_cache).total
        billionths = int((cost or Decimal(0)) * _BILLION)
        if tokens or billionths:
            await self._store.add(key.chain_id, tokens, billionths, self._keep_s)


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
