"""The fair-share arithmetic (`capacity.fair_share`), property-tested: nobody below its
share is refused for fairness, nobody is refused while nobody starves, the shares add up to
the pool, and in any order of arrivals and departures a starved tenant's share is kept for
it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.capacity.fair_share import (
    SPEND_RATIO_BOUND,
    Saturation,
    by_spend,
    lent,
    must_yield,
    occupied_capacity,
    owed,
    shares,
)

TENANTS = ("t0", "t1", "t2", "t3")
tenants = st.sampled_from(TENANTS)
holdings = st.dictionaries(tenants, st.integers(0, 20))
weights = st.dictionaries(tenants, st.floats(0.1, 10))
capacities = st.integers(1, 40)


@given(capacities, st.sets(tenants, min_size=1), weights)
def test_the_shares_add_up_to_the_pool(
    capacity: int, asking: set[str], w: dict[str, float]
) -> None:
    split = shares(capacity, asking, w)
    assert set(split) == asking
    assert abs(sum(split.values()) - capacity) < 1e-6


@given(tenants, capacities, holdings, st.sets(tenants), weights)
def test_nobody_below_its_share_is_refused(
    tenant: str, capacity: int, held: dict[str, int], starved: set[str], w: dict[str, float]
) -> None:
    """Below its share of the pool as occupied now (never more than its share of the
    ceilings): never refused for fairness."""
    asking = {tenant, *starved, *(t for t, n in held.items() if n > 0)}
    occupied = occupied_capacity(capacity, held)
    assert occupied <= capacity
    if held.get(tenant, 0) < shares(occupied, asking, w)[tenant]:
        assert not must_yield(tenant, capacity, held, starved, w)


@given(tenants, capacities, st.integers(0, 20), weights)
def test_nobody_is_refused_while_no_other_tenant_asks(
    tenant: str, capacity: int, own: int, w: dict[str, float]
) -> None:
    held = {tenant: own}
    assert not must_yield(tenant, capacity, held, set(), w)
    assert not must_yield(tenant, capacity, held, {tenant}, w)


@given(tenants, capacities, holdings, weights)
def test_with_nobody_starved_only_the_headroom_of_tenants_below_their_shares_is_kept(
    tenant: str, capacity: int, held: dict[str, int], w: dict[str, float]
) -> None:
    """Nobody starved: a tenant yields only the pool's last free leases, one for each other
    tenant holding leases below its share."""
    if must_yield(tenant, capacity, held, set(), w):
        asking = {tenant, *(t for t, n in held.items() if n > 0)}
        split = shares(capacity, asking, w)
        below = [t for t in asking - {tenant} if held.get(t, 0) < split[t]]
        assert below
        assert capacity - sum(held.values()) <= len(below)


def test_a_flooding_tenant_leaves_a_lease_free_for_one_below_its_share() -> None:
    # 10 leases: big holds 8, small 1 (its share is 5); one lease is free
    assert must_yield("big", 10, {"big": 8, "small": 1}, set())
    assert not must_yield("small", 10, {"big": 8, "small": 1}, set())
    assert not must_yield("big", 10, {"big": 7, "small": 1}, set())  # two free: one is big's


@given(tenants, capacities, holdings, st.sets(tenants, min_size=1), weights)
def test_a_refused_tenant_holds_its_share_and_another_is_below_its_own(
    tenant: str, capacity: int, held: dict[str, int], starved: set[str], w: dict[str, float]
) -> None:
    if must_yield(tenant, capacity, held, starved, w):
        asking = {tenant, *starved, *(t for t, n in held.items() if n > 0)}
        own = held.get(tenant, 0)
        occupied = shares(occupied_capacity(capacity, held), asking, w)
        starving = [t for t in starved - {tenant} if held.get(t, 0) < occupied[t]]
        split = shares(capacity, asking, w)
        below = [t for t in asking - {tenant} if held.get(t, 0) < split[t]]
        assert (own >= occupied[tenant] and starving) or (
            own >= split[tenant] and below and capacity - sum(held.values()) <= len(below)
        )


def test_a_pool_whose_buckets_ran_empty_is_shared_out_at_what_it_holds() -> None:
    """The quotas' ceilings sum to 40 leases, but the buckets ran empty with 20 held: small,
    turned away, gets its share of the 20 (and the one being minted), not of the 40."""
    held = {"big": 15, "small": 5}
    assert occupied_capacity(40, held) == 21
    assert must_yield("big", 40, held, {"small"})
    assert not must_yield("small", 40, held, {"small"})
    assert not must_yield("big", 40, held, set())  # nobody turned away: no yielding
    assert not must_yield("big", 40, {"big": 10, "small": 10}, {"small"})  # small at its half


# A pool of `capacity` leases. Each step a lease ends (its holder chosen by the draw) or a
# tenant asks: a full pool refuses and marks it starved; otherwise it is admitted unless it
# must yield. "big" asks far more often than "small".
steps = st.lists(
    st.one_of(
        st.tuples(st.just("end"), st.sampled_from(("big", "small"))),
        st.tuples(st.just("ask"), st.sampled_from(("big",) * 9 + ("small",))),
    ),
    max_size=300,
)


@given(st.integers(2, 12), steps)
def test_a_flood_never_takes_a_starved_tenants_share(
    capacity: int, run: list[tuple[str, str]]
) -> None:
    held = {"big": 0, "small": 0}
    starved: set[str] = set()
    for action, tenant in run:
        if action == "end":
            held[tenant] = max(0, held[tenant] - 1)
            continue
        if sum(held.values()) >= capacity:
            starved.add(tenant)
            continue
        if must_yield(tenant, capacity, held, starved):
            continue
        before = dict(held)
        held[tenant] += 1
        if tenant == "big" and "small" in starved:
            # big only grows past half the pool while small already holds its half
            assert before["big"] < capacity / 2 or before["small"] >= capacity / 2
        if held["small"] >= capacity / 2:
            starved.discard("small")  # satisfied: its window would pass
    assert sum(held.values()) <= capacity


@given(st.integers(4, 30), steps)
def test_a_flood_leaves_a_lease_free_for_a_tenant_below_its_share_that_holds_leases(
    capacity: int, run: list[tuple[str, str]]
) -> None:
    """Nobody starved yet: the flooding tenant never takes the pool's last free lease while
    the small one, holding leases, holds less than the whole leases of its half, so the small
    one's next mint finds room. One lease of headroom per such tenant: a second mint of the
    small one before a lease ends may be turned away (Hypothesis found it: 6 leases, big 4 and
    small 2), and from then on the starved tenant's share applies (the test above). Whole
    leases: of an odd pool, one tenant ends half a lease below its share (5 leases: 3 and 2)."""
    held = {"big": 0, "small": 1}
    for action, tenant in run:
        if action == "end":
            held[tenant] = max(0 if tenant == "big" else 1, held[tenant] - 1)
            continue
        if sum(held.values()) >= capacity or must_yield(tenant, capacity, held, set()):
            continue
        held[tenant] += 1
        if tenant == "big" and held["small"] < capacity // 2:
            assert sum(held.values()) < capacity, "the small tenant's next lease was taken"


def test_the_pool_counts_as_full_for_a_window_after_anyone_was_turned_away() -> None:
    saturation = Saturation()
    assert not saturation.lately("m", 100.0, 3.0)
    saturation.refused("m", "big", 100.0, 3.0)  # the tenant itself counts: its headroom check
    assert saturation.lately("m", 103.0, 3.0)
    assert not saturation.lately("m", 103.5, 3.0)
    assert not saturation.lately("other-model", 100.0, 3.0)


def test_a_starved_tenant_is_owed_a_lease_only_out_of_another_tenants_excess() -> None:
    held = {"big": 15, "small": 5}
    assert owed("small", 40, held, {"small"})
    assert not owed("small", 40, held, set())  # not turned away: nothing owed
    assert not owed("big", 40, held, {"big", "small"})  # above its share
    assert not owed("small", 40, {}, {"small", "big"})  # a cold pool: nobody's excess
    assert not owed("small", 40, {"big": 10, "small": 9}, {"small"})  # big at its share


@given(tenants, capacities, holdings, st.sets(tenants), weights)
def test_a_lease_owed_to_one_tenant_is_one_another_must_yield(
    tenant: str, capacity: int, held: dict[str, int], starved: set[str], w: dict[str, float]
) -> None:
    """Whenever a tenant is owed a lease, some other tenant holding more than its share must
    yield its own next mint: the two rules share one pool out the same way."""
    if owed(tenant, capacity, held, starved, w):
        assert any(
            must_yield(other, capacity, held, starved, w)
            for other, n in held.items()
            if other != tenant and n > 0
        )


def test_a_cold_pool_one_tenant_filled_is_lent_to_the_other_at_once() -> None:
    """Big filled a cold pool past its ceilings (20 leases of 19) before small asked: small,
    turned away, is owed its share of the pool as occupied (9.5) and may go as far past the
    ceilings as big holds beyond its own share (10 whole leases); nothing once small holds its
    share, or when big is not above its own."""
    assert lent("small", 19, {"big": 20, "small": 4}, {"small"}) == 10
    assert lent("small", 19, {"big": 20, "small": 10}, {"small"}) == 0
    assert lent("small", 19, {"big": 5, "small": 4}, {"small"}) == 0  # big at its share (5)
    assert lent("small", 19, {"big": 20, "small": 4}, set()) == 0  # never turned away


@given(tenants, capacities, holdings, st.sets(tenants), weights)
def test_leases_lent_are_the_other_tenants_excess_and_only_to_a_tenant_owed(
    tenant: str, capacity: int, held: dict[str, int], starved: set[str], w: dict[str, float]
) -> None:
    """What a tenant may take past the ceilings never exceeds what the others hold in all, and
    is lent only to a tenant owed a lease, by a tenant that must then yield its own mints."""
    lend = lent(tenant, capacity, held, starved, w)
    assert 0 <= lend <= sum(n for t, n in held.items() if t != tenant)
    if lend:
        assert owed(tenant, capacity, held, starved, w)
        assert any(must_yield(t, capacity, held, starved, w) for t in held if t != tenant)


def test_a_tenant_whose_leases_spend_a_quarter_gets_four_times_the_leases() -> None:
    """Batch's ten leases spent 40,000 tokens over the window, interactive's ten 10,000: for
    the same share of the pool's quota, interactive's share is 16 of 20 leases, batch's 4."""
    weights = by_spend(None, {"batch": 10, "interactive": 10}, {"batch": 4e4, "interactive": 1e4})
    split = shares(20, {"batch", "interactive"}, weights)
    assert round(split["interactive"], 6) == 16.0
    assert round(split["batch"], 6) == 4.0
    declared = by_spend({"batch": 2.0}, {"batch": 10, "interactive": 10}, {"batch": 4e4})
    assert declared == {"batch": 2.0}  # one tenant measured: nothing to compare


def test_leases_that_spent_nearly_nothing_weigh_at_most_the_bound() -> None:
    """Idle leases spend a millionth of busy ones: unbounded, the idle tenant would weigh
    about 500,000 and claim the whole pool; it weighs the bound, 8."""
    weights = by_spend(None, {"busy": 5, "idle": 5}, {"busy": 1e6, "idle": 1.0})
    assert weights["idle"] == SPEND_RATIO_BOUND
    assert weights["busy"] == pytest.approx(0.5, rel=1e-5)  # the mean lease spends half of one


spends = st.floats(1.0, 1e6)


@given(
    st.dictionaries(tenants, st.tuples(st.integers(1, 20), spends), min_size=2),
    weights,
    capacities,
)
def test_shares_by_spend_give_each_tenant_the_same_spend_per_weight(
    measured: dict[str, tuple[int, float]], w: dict[str, float], capacity: int
) -> None:
    """Where no tenant's lease spends more than the bound off the mean, the leases each
    tenant's share holds spend, at the rate its leases were measured, the same per unit of
    its declared weight: shares of the pool's quota, counted in leases."""
    held = {t: n for t, (n, _) in measured.items()}
    spent = {t: x for t, (_, x) in measured.items()}
    per_lease = {t: spent[t] / held[t] for t in held}
    mean = sum(per_lease.values()) / len(per_lease)
    if any(not 1 / SPEND_RATIO_BOUND <= mean / r <= SPEND_RATIO_BOUND for r in per_lease.values()):
        return
    split = shares(capacity, set(held), by_spend(w, held, spent))
    quota = {t: split[t] * per_lease[t] / w.get(t, 1.0) for t in held}
    assert max(quota.values()) - min(quota.values()) <= 1e-6 * max(quota.values())
