"""A running total's rules, as every spend store keeps them (the Redis scripts in
`leasegate.kv.spend_redis` run the same machine; the in-process store is this class).

A total = `base` (the evidence of the requests started before `cutoff`) + the requests
counted since (`add` with `at >= cutoff`). Every counted request is also kept per second of
its start (`buckets`), so that a later cut-off can move past it: rebasing at a whole-second
cut-off drops the buckets before it (their rows are in the new base) and keeps the others.
A total without a cut-off is *unknown* (never started, or lost with the store's data): its
requests are kept in buckets only, and the first rebase makes it known. So any number of
rebases, by any number of replicas, in any order, count each request once: through the
evidence if it started before the cut-off that stands, through `add` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from leasegate.core.ports.spend import AccountSpend
from leasegate.spend.budget import billionths
from leasegate.spend.prices import TokenCounts


@dataclass(slots=True)
class RunningTotal:
    cutoff: float | None = None
    tokens: int = 0
    cost: int = 0
    buckets: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return self.cutoff is not None

    def add(self, tokens: int, cost: int, at: float) -> bool:
        """Whether the request now counts in the total (an unknown total only keeps it)."""
        if self.cutoff is not None and at < self.cutoff:
            return False
        second = math.floor(at)
        held_tokens, held_cost = self.buckets.get(second, (0, 0))
        self.buckets[second] = (held_tokens + tokens, held_cost + cost)
        if self.cutoff is None:
            return False
        self.tokens += tokens
        self.cost += cost
        return True

    def rebase(self, cutoff: float, tokens: int, cost: int, *, only_if_unknown: bool) -> bool:
        """`cutoff` a whole second; refused (False) past a later cut-off, or any with
        `only_if_unknown`."""
        if self.cutoff is not None and (only_if_unknown or cutoff < self.cutoff):
            return False
        kept = {s: b for s, b in self.buckets.items() if s >= cutoff}
        self.buckets = kept
        self.cutoff = cutoff
        self.tokens = tokens + sum(b[0] for b in kept.values())
        self.cost = cost + sum(b[1] for b in kept.values())
        return True


def reconcile_cutoff(now: float, settle_s: float) -> float:
    """A rebase's cut-off: a whole second (a bucket is never split) at least `settle_s` ago,
    so every row started before it and finished has been written."""
    return float(math.floor(now - settle_s))


def evidence_total(
    groups: Iterable[AccountSpend], input_includes_cache: dict[str, bool]
) -> tuple[int, int]:
    """(tokens, cost in billionths) of evidence sums per account; tokens counted in each
    account's provider convention (`TokenCounts`), as a finished request adds them."""
    tokens = 0
    cost = Decimal(0)
    for group in groups:
        counts = TokenCounts(
            group.input_tokens,
            group.output_tokens,
            group.cache_read_input_tokens,
            group.cache_creation_input_tokens,
            input_includes_cache=input_includes_cache.get(group.account_id or "", False),
        )
        tokens += counts.total
        cost += group.cost or Decimal(0)
    return tokens, billionths(cost)
