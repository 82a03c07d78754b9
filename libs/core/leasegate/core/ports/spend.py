"""The running spend totals (a dispatch chain's, a tenant's per period), shared by every proxy
replica, and the evidence they are rebuilt from.

Amounts cross these ports as integers: tokens, and cost in billionths of the currency unit
(`leasegate.spend.COST_QUANTUM`), so a store adds exactly (Redis HINCRBY) and never rounds.

A total is *evidence before its cut-off plus every request since*: `rebase` sets the part
before the cut-off (summed from evidence rows started before it) and `add` counts a finished
request only when its row starts at or after the cut-off. A total without a cut-off is
*unknown* (never started, or lost with the store's data): `spent` says so with None, never 0,
and `add` only keeps the request, per second of its start, for the rebase that makes the total
known.
The rules are `leasegate.spend.totals.RunningTotal`; every store keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol


class ChainSpend(Protocol):
    async def spent(self, total_id: str) -> tuple[int, int] | None:
        """(tokens, cost in billionths) of the total; None when it is unknown."""
        ...

    async def kept(self, total_id: str) -> bool:
        """Whether an unknown total has kept requests since it was lost (or ever written)."""
        ...

    async def add(
        self, total_id: str, tokens: int, cost_billionths: int, at: float, keep_s: float
    ) -> None:
        """Count one finished request whose evidence row started at `at` (epoch seconds), if
        the total is known and `at` is not before its cut-off; kept at least `keep_s` more."""
        ...

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
        """Make the total the evidence before `cutoff` (`tokens`, `cost_billionths`) plus the
        requests counted at or after it. Refused (the total unchanged) when it has a later
        cut-off, or any cut-off with `only_if_unknown`. Returns the total as it stands."""
        ...


@dataclass(frozen=True, slots=True)
class AccountSpend:
    """One account's evidence sums: tokens as the provider reported them, and cost."""

    account_id: str | None
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cost: Decimal | None


class SpendEvidence(Protocol):
    async def spend_evidence(
        self, *, tenant: str | None, chain_id: str | None, since: datetime, until: datetime
    ) -> Sequence[AccountSpend]:
        """Sums per account of the evidence rows started in `[since, until)` of one tenant's
        decisions, or of one dispatch chain's (exactly one of `tenant`, `chain_id`)."""
        ...


class BudgetedChains(Protocol):
    async def budgeted_live_chains(self, now: datetime) -> list[str]:
        """The chains of the keys live at `now` that carry a dispatch budget: the chain totals
        the spend reconciler brings back to evidence."""
        ...
