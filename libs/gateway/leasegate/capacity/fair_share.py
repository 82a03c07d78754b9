"""Fair shares of a saturated pool's leases: pure arithmetic, no I/O.

A pool (the accounts serving one model) has `capacity` leases. The tenants *asking* for them
are those holding some, those a full pool turned away lately (`starved`), and the tenant now
minting. Each asking tenant's share is the capacity split by weight (default weight 1: equal
shares), each weight scaled by how little one of the tenant's leases spends against the mean
lease (`by_spend`): shares of the pool's quota, counted in leases. A tenant at or above its
share yields to a starved tenant still below its own: its mint is refused (held, retry
shortly) so that the next lease that frees goes to the starved one. Those two shares are cut
from the pool as *occupied* (the leases held and the one being minted, `occupied_capacity`):
a pool whose quotas' buckets ran empty turns tenants away below its lease ceilings, and is
then full at what it holds. A tenant also leaves **headroom**: it does not take the pool's
last free leases, one for each other asking tenant below its share of the ceilings, so a
tenant asking for less than its share is served at once instead of first being turned away
by a full pool. Nobody below its share is ever refused for fairness, and while no other
tenant asks the pool is first come, first served (docs/capacity.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set

DEFAULT_WEIGHT = 1.0
SPEND_RATIO_BOUND = 8.0
"""The most a tenant's weight is scaled by what its leases spend, either way: a window's few
requests are a noisy measure, and a tenant whose leases sat idle through it must not claim
the whole pool."""


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


def by_spend(
    weights: Mapping[str, float] | None,
    held: Mapping[str, int],
    spent: Mapping[str, float],
) -> dict[str, float]:
    """The tenants' weights scaled so that shares of leases become shares of what the leases
    spend: each tenant holding leases that spent something over the window weighs its
    weight times the mean spend of a lease over its own (within `SPEND_RATIO_BOUND` either
    way); a tenant whose leases spend a quarter of another's is given four times the leases
    for the same share of the pool's quota. A tenant without a measure (holding nothing, or
    nothing spent) keeps its weight, as does everyone while fewer than two tenants have one.
    Tenants not named weigh `DEFAULT_WEIGHT`."""
    declared = dict(weights or {})
    per_lease = {t: spent[t] / n for t, n in held.items() if n > 0 and spent.get(t, 0.0) > 0.0}
    if len(per_lease) < 2:
        return declared
    mean = sum(per_lease.values()) / len(per_lease)
    scaled = dict(declared)
    for tenant, rate in per_lease.items():
        ratio = min(max(mean / rate, 1 / SPEND_RATIO_BOUND), SPEND_RATIO_BOUND)
        scaled[tenant] = declared.get(tenant, DEFAULT_WEIGHT) * ratio
    return scaled


def must_yield(
    tenant: str,
    capacity: int,
    held: Mapping[str, int],
    starved: Set[str],
    weights: Mapping[str, float] | None = None,
) -> bool:
    """Whether `tenant`'s next lease would come out of another tenant's share: either
    another starved tenant holds less than its share of the pool as occupied now
    (`occupied_capacity`) while `tenant` holds at least its own, or `tenant` holds at least
    its share of the ceilings and the pool's free leases are no more than the other asking
    tenants below their shares (one lease of headroom is left for each)."""
    asking = _asking(tenant, held, starved)
    own = held.get(tenant, 0)
    occupied = shares(occupied_capacity(capacity, held), asking, weights)
    if own >= occupied[tenant] and any(
        t != tenant and held.get(t, 0) < occupied[t] for t in starved
    ):
        return True
    share = shares(capacity, asking, weights)
    if own < share[tenant]:
        return False
    below = [t for t in asking if t != tenant and held.get(t, 0) < share[t]]
    free = capacity - sum(held.values())
    return bool(below) and free <= len(below)


def owed(
    tenant: str,
    capacity: int,
    held: Mapping[str, int],
    starved: Set[str],
    weights: Mapping[str, float] | None = None,
) -> bool:
    """Whether the lease `tenant` asks for is another tenant's excess: `tenant` was turned
    away lately (it is `starved`) and holds less than its share of the pool as occupied,
    while another tenant holds more than its own. Two tenants both turned away with nothing
    held (a cold pool) owe each other nothing."""
    return bool(_excess(tenant, capacity, held, starved, weights))


def lent(
    tenant: str,
    capacity: int,
    held: Mapping[str, int],
    starved: Set[str],
    weights: Mapping[str, float] | None = None,
) -> int:
    """How many whole leases the other tenants hold beyond their shares of the pool as
    occupied, when `tenant` is `owed` a lease (0 otherwise): how far past the pool's ceilings
    the leases owed to `tenant` may go while those tenants are held back. A cold pool that
    one tenant filled before another asked is lent out at once instead of the other waiting
    for the first one's leases to end."""
    return sum(math.floor(over) for over in _excess(tenant, capacity, held, starved, weights))


def _asking(tenant: str, held: Mapping[str, int], starved: Set[str]) -> set[str]:
    """The tenants a pool is shared among: `tenant`, the starved, and those holding leases."""
    return {tenant, *starved, *(t for t, n in held.items() if n > 0)}


def _excess(
    tenant: str,
    capacity: int,
    held: Mapping[str, int],
    starved: Set[str],
    weights: Mapping[str, float] | None,
) -> list[float]:
    """What each other tenant holds beyond its share of the pool as occupied, when `tenant`
    was turned away lately and holds less than its own share; empty otherwise."""
    if tenant not in starved:
        return []
    occupied = shares(occupied_capacity(capacity, held), _asking(tenant, held, starved), weights)
    if held.get(tenant, 0) >= occupied[tenant]:
        return []
    return [n - occupied[t] for t, n in held.items() if t != tenant and n > occupied.get(t, n)]


def occupied_capacity(capacity: int, held: Mapping[str, int]) -> int:
    """The pool a starved tenant's share is cut from: the leases held now and the one being
    minted, at most the ceilings' sum. A pool turns tenants away *below* its lease ceilings
    when its quotas' buckets are empty (the refill, not the lease count, ran out): it is
    full at what it holds, and shares of the ceilings' sum would never reach anyone."""
    return min(capacity, sum(held.values()) + 1)


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
