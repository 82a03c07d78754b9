"""Chain spend for the embedded single-process mode: a dict, atomic on one event loop."""

from __future__ import annotations


class InProcessChainSpend:
    def __init__(self) -> None:
        self._totals: dict[str, tuple[int, int]] = {}

    async def spent(self, chain_id: str) -> tuple[int, int]:
        return self._totals.get(chain_id, (0, 0))

    async def add(self, chain_id: str, tokens: int, cost_billionths: int, keep_s: float) -> None:
        held_tokens, held_cost = self._totals.get(chain_id, (0, 0))
        self._totals[chain_id] = (held_tokens + tokens, held_cost + cost_billionths)
