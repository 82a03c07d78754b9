"""The fair-share arithmetic (`capacity.fair_share`), property-tested: nobody below its
share is refused for fairness, nobody is refused while nobody starves, the shares add up to
the pool, and in any order of arrivals and departures a starved tenant's share is kept for
it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.capacity.fair_share import must_yield, shares

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
    asking = {tenant, *starved, *(t for t, n in held.items() if n > 0)}
    if held.get(tenant, 0) < shares(capacity, asking, w)[tenant]:
        assert not must_yield(tenant, capacity, held, starved, w)


@given(tenants, capacities, holdings, weights)
def test_nobody_is_refused_while_no_other_tenant_starves(
    tenant: str, capacity: int, held: dict[str, int], w: dict[str, float]
) -> None:
    assert not must_yield(tenant, capacity, held, set(), w)
    assert not must_yield(tenant, capacity, held, {tenant}, w)


@given(tenants, capacities, holdings, st.sets(tenants, min_size=1), weights)
def test_a_refused_tenant_holds_its_share_and_a_starved_one_less(
    tenant: str, capacity: int, held: dict[str, int], starved: set[str], w: dict[str, float]
) -> None:
    if must_yield(tenant, capacity, held, starved, w):
        asking = {tenant, *starved, *(t for t, n in held.items() if n > 0)}
        split = shares(capacity, asking, w)
        assert held.get(tenant, 0) >= split[tenant]
        assert any(held.get(t, 0) < split[t] for t in starved - {tenant})


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
