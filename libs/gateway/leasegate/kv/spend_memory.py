"""Spend totals for the embedded single-process mode: a dict of `RunningTotal`s, atomic on one
event loop. Lost with the process, like Redis data without persistence: a restarted gateway
finds every total unknown and rebuilds it from evidence before admitting (docs/spend.md)."""

from __future__ import annotations

from leasegate.spend.totals import RunningTotal


class InProcessChainSpend:
    def __init__(self) -> None:
        self._totals: dict[str, RunningTotal] = {}

    async def spent(self, total_id: str) -> tuple[int, int] | None:
        total = self._totals.get(total_id)
        if total is None or not total.known:
            return None
        return total.tokens, total.cost

    async def kept(self, total_id: str) -> bool:
        return total_id in self._totals

    async def add(
        self, total_id: str, tokens: int, cost_billionths: int, at: float, keep_s: float
    ) -> None:
        self._totals.setdefault(total_id, RunningTotal()).add(tokens, cost_billionths, at)

    async def rebase(
        self,
        total_id: str,
        cutoff: float,
        tokens: int,
        cost_billionths: int,
        keep_s: float,
        *,
        only_if_unknown: bool,
    ) -> tuple[int, int]:
        total = self._totals.setdefault(total_id, RunningTotal())
        total.rebase(cutoff, tokens, cost_billionths, only_if_unknown=only_if_unknown)
        return total.tokens, total.cost
