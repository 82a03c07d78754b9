"""Fair shares of a saturated pool's leases: pure arithmetic, no I/O.

A pool (the accounts serving one model) has `capacity` leases. The tenants *asking* for them
are those holding some, those a full pool turned away lately (`starved`), and the tenant now
minting. Each asking tenant's share is the capacity split by weight (default weight 1: equal
shares). A tenant at or above its share yields to a starved tenant still below its own: its
mint is refused (held, retry shortly) so that the next lease that frees goes to the starved
one. It also leaves **headroom**: it does not take the pool's last free leases, one for each
other asking tenant below its share, so a tenant asking for less than its share is served
at once instead of first being turned away by a full pool. Nobody below its share is ever
refused for fairness, and while no other tenant asks the pool is first come, first served
(docs/capacity.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Set

DEFAULT_WEIGHT = 1.0


def shares(
    capacity: int,
    asking: Set[str],
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each asking tenant's share of `capacity`, split by weight; the shares sum to it."""
    weight = {t: (weights or {}).get(t, DEFAULT_WEIGHT) for t in asking}
    total = sum(weight.values())
    if total <= 0:
        return dict.fromkeys(asking, 0.0)
    return {t: capacity * w / total for t, w in weight.items()}


def must_yield(
    tenant: str,
    capacity: int,
    held: Mapping[str, int],
    starved: Set[str],
    weights: Mapping[str, float] | None = None,
) -> bool:
    """Whether `tenant`'s next lease would come out of another tenant's share: `tenant` holds
    at least its share, and either another starved tenant holds less than its own, or the
    pool's free leases are no more than the other asking tenants below their shares (one
    lease of headroom is left for each)."""
    asking = {tenant, *starved, *(t for t, n in held.items() if n > 0)}
    share = shares(capacity, asking, weights)
    if held.get(tenant, 0) < share[tenant]:
        return False
    below = [t for t in asking if t != tenant and held.get(t, 0) < share[t]]
    if any(t in starved for t in below):
        return True
    free = capacity - sum(held.values())
    return bool(below) and free <= len(below)


class Saturation:
    """Which tenants this process last turned away from each model's full pool (refused
    `no-eligible-account`, or `tenant-fair-share-exceeded`: the pool is as full for that
    tenant), and when. Mints are shared out only while some tenant was turned away within
    the window; until then they spend no read on fairness. Times are epoch seconds, given;
    entries older than the window are dropped as new ones arrive."""

    def __init__(self) -> None:
        self._refused: dict[str, dict[str, float]] = {}

    def refused(self, model: str, tenant: str, now: float, window_s: float) -> None:
        tenants = self._refused.setdefault(model, {})
        for other, at in list(tenants.items()):
            if now - at > window_s:
                del tenants[other]
        tenants[tenant] = now

    def lately(self, model: str, now: float, window_s: float) -> bool:
        """Whether any tenant was turned away from the model's pool within the window (the
        pool was full lately: its headroom is kept for the tenants below their shares)."""
        return any(now - at <= window_s for at in self._refused.get(model, {}).values())
