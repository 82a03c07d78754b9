"""The running spend of a dispatch's chain, shared by every proxy replica.

Amounts cross this port as integers: tokens, and cost in billionths of the currency unit
(`leasegate.spend.COST_QUANTUM`), so a store adds exactly (Redis HINCRBY) and never rounds.
"""

from __future__ import annotations

from typing import Protocol


class ChainSpend(Protocol):
    async def spent(self, chain_id: str) -> tuple[int, int]:
        """(tokens, cost in billionths) recorded for the chain so far; (0, 0) if none."""
        ...

    async def add(self, chain_id: str, tokens: int, cost_billionths: int, keep_s: float) -> None:
        """Add one finished request's spend; the total is kept at least `keep_s` more."""
        ...
