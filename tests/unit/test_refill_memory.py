"""The refill a header-learned bucket is remembered at (`routing.refills`): what a nearly full
bucket's headers say is no measure of it, so the ceiling keeps what an informative answer
told, until the limit changes or it is long unconfirmed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.ports.quota import Bucket, Quota
from leasegate.routing.lease_ceiling import LeaseRate, refill_rate, sustained_leases
from leasegate.routing.refills import FORGET_S, RefillMemory, observed_refill

T0 = 1_000.0
PAIR = ("an-claude", "claude-sonnet")


def anthropic(limit: int, level: float, refill_per_s: float, at: float) -> Quota:
    """What Anthropic's headers say of a bucket holding `level` of `limit` at `at`: remaining
    a whole number (rounded down), the reset a whole second (rounded up)."""
    full_at = at + (limit - level) / refill_per_s
    bucket = Bucket(limit, math.floor(level), float(math.ceil(full_at)))
    return Quota(*PAIR, {"input-tokens": bucket}, "headers", at)


def test_a_nearly_full_buckets_headers_understate_its_refill_and_the_memory_keeps_the_truth() -> (
    None
):
    memory = RefillMemory()
    lease = LeaseRate(0.6, 450.0, 100.0)
    drained = anthropic(20_000, 7_676, 2_000.0, T0 + 0.3)  # 12,324 short: informative
    informed = memory.informed({PAIR: drained}, T0 + 0.3)[PAIR]
    told = 12_324 / (math.ceil(T0 + 0.3 + 12_324 / 2_000) - (T0 + 0.3))  # 1,839: reset rounded
    assert refill_rate(informed.buckets["input-tokens"], T0 + 0.3) == pytest.approx(told)
    nearly_full = anthropic(20_000, 19_067, 2_000.0, T0 + 30.7)  # reset "in 1 s", really 0.47
    raw = refill_rate(nearly_full.buckets["input-tokens"], nearly_full.observed_at)
    assert raw is not None
    assert raw < 1_000  # what the headers alone say: half the refill
    assert sustained_leases(nearly_full, lease) == 2
    informed = memory.informed({PAIR: nearly_full}, T0 + 30.7)[PAIR]
    kept = refill_rate(informed.buckets["input-tokens"], informed.observed_at)
    assert kept == pytest.approx(told)
    assert sustained_leases(informed, lease) == 5  # ceil(1,839 / 450): the account's room
    # what remains now is still the provider's word
    assert informed.buckets["input-tokens"].remaining == 19_067
    assert informed.room_at(1, 500, T0 + 30.7, input_tokens=500) is None


def test_the_memory_is_forgotten_when_the_limit_changes_or_long_unconfirmed() -> None:
    memory = RefillMemory()
    memory.informed({PAIR: anthropic(20_000, 5_000, 2_000.0, T0)}, T0)
    new_tier = anthropic(40_000, 39_500, 4_000.0, T0 + 1)
    assert memory.informed({PAIR: new_tier}, T0 + 1)[PAIR] == new_tier  # nothing kept
    memory.informed({PAIR: anthropic(40_000, 10_000, 4_000.0, T0 + 2)}, T0 + 2)
    late = anthropic(40_000, 39_500, 4_000.0, T0 + 3 + FORGET_S)
    assert memory.informed({PAIR: late}, T0 + 3 + FORGET_S)[PAIR] == late


def test_declared_quotas_and_declared_windows_are_left_as_they_are() -> None:
    memory = RefillMemory()
    declared = Quota(*PAIR, {"requests": Bucket(60, 60, None, 60.0)}, "declared", T0)
    assert memory.informed({PAIR: declared}, T0)[PAIR] == declared


@given(
    limit=st.integers(10, 1_000_000),
    refill_per_s=st.floats(0.1, 100_000.0),
    levels=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
    step_s=st.floats(0.01, 5.0),
)
def test_the_remembered_refill_never_exceeds_the_truth_by_more_than_the_remainings_rounding(
    limit: int, refill_per_s: float, levels: list[float], step_s: float
) -> None:
    """Whatever the bucket's levels when read, the refill the ceiling is given is the truth
    or less, by at most the rounding of whole-number remainings over an informative
    deficit (under 1 / (a quarter of the limit)), and comes from an informative read."""
    memory = RefillMemory()
    for n, share in enumerate(levels):
        at = T0 + n * step_s
        quota = anthropic(limit, share * limit, refill_per_s, at)
        bucket = memory.informed({PAIR: quota}, at)[PAIR].buckets["input-tokens"]
        told = refill_rate(bucket, at)
        if bucket.window_s is None:
            assert all(
                observed_refill(
                    anthropic(limit, s * limit, refill_per_s, T0).buckets["input-tokens"], T0
                )
                is None
                for s in levels[: n + 1]
            )
            continue
        assert told is not None
        assert told <= refill_per_s * (1 + 1 / (0.25 * limit)) + 1e-9
