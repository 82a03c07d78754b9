"""The fleet bench's maxima (`bench.fleet.workload`): the pool's maximum at the offered mix,
and the maximum for the mix a router keeping fair shares serves (the smaller tenant in full,
the other filling the pool)."""

from __future__ import annotations

import pytest

from bench.fleet.workload import (
    ACCOUNTS,
    TENANTS,
    blended_mix,
    fair_maximum,
    fleet_size,
    maximum,
    pace,
)

PACES = {t.name: pace(t) for t in TENANTS}
OFFERED_MIX = maximum(
    ACCOUNTS,
    *blended_mix(PACES, {t.name: t.share / PACES[t.name].tokens_per_s for t in TENANTS}),
)


def test_a_saturated_fleet_served_fairly_fills_the_pool_with_the_small_tenant_in_full() -> None:
    workers = fleet_size(1.3, TENANTS, OFFERED_MIX.tokens_per_s)
    fair = fair_maximum(ACCOUNTS, PACES, workers)
    small = PACES["fleet/interactive"].turns_per_s * workers["fleet/interactive"]
    assert small / fair.turns_per_s > 0.3  # more of the turns than the offered mix's 30 %
    # the pool is full at that mix: its turns are what the served mix's maximum allows
    batch = fair.turns_per_s - small
    assert batch < PACES["fleet/batch"].turns_per_s * workers["fleet/batch"]
    # smaller turns: fewer tokens than at the offered mix, more turns (requests-bound accounts)
    assert fair.tokens_per_s < OFFERED_MIX.tokens_per_s
    assert fair.turns_per_s > OFFERED_MIX.turns_per_s


def test_one_tenant_alone_has_the_maximum_of_its_own_mix() -> None:
    alone = {"fleet/batch": 10}
    paces = {"fleet/batch": PACES["fleet/batch"]}
    fair = fair_maximum(ACCOUNTS, paces, alone)
    own = maximum(ACCOUNTS, *blended_mix(paces, alone))
    assert fair.tokens_per_s == pytest.approx(own.tokens_per_s)
