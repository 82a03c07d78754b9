"""The adaptive lease ceiling's arithmetic (`routing.lease_ceiling`), property-tested under a
simulated clock: the ceiling is what the quota's refill sustains at the measured per-lease
spend (that many leases never drain the bucket, one more does), the time it names for room is
when room comes, the operator's ceiling bounds it, and the moving average follows its
samples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.routing.lease_ceiling import (
    LeaseRate,
    Room,
    default_prior,
    effective_ceiling,
    prior_rate,
    quota_room,
    quota_wait,
    sample_weight,
    sampled,
    smoothed,
    sustained_leases,
)

T0 = 1_000.0
WINDOW_S = 10.0


def declared(requests: int, tokens: int, observed_at: float = T0) -> Quota:
    """A quota of `requests` and `tokens` per WINDOW_S, full at `observed_at`."""
    return Quota(
        "a",
        "m",
        {
            "requests": Bucket(requests, requests, None, WINDOW_S),
            "tokens": Bucket(tokens, tokens, None, WINDOW_S),
        },
        "declared",
        observed_at,
    )


def drains(quota: Quota, leases: int, rate: LeaseRate, horizon_s: float) -> bool:
    """Whether `leases` live leases, each spending `rate` continuously, empty a bucket of the
    quota (refilled continuously, full at the start) within `horizon_s`: a simulated clock."""
    level = {d: float(b.limit or 0) for d, b in quota.buckets.items()}
    dt, now = 0.05, 0.0
    while now < horizon_s:
        now += dt
        for dimension, bucket in quota.buckets.items():
            limit = float(bucket.limit or 0)
            refill = limit / WINDOW_S
            level[dimension] = min(
                limit, level[dimension] + (refill - leases * rate.spend(dimension)) * dt
            )
            if level[dimension] < 0:
                return True
    return False


requests_limits = st.integers(5, 600)
token_limits = st.integers(1_000, 200_000)
rates = st.builds(
    LeaseRate,
    st.floats(0.01, 5.0),
    st.floats(1.0, 5_000.0),
    st.floats(1.0, 2_000.0),
)


def binding_at(
    requests: int, tokens: int, leases: int, fraction: float, slack: float, tokens_bind: bool
) -> tuple[Quota, LeaseRate]:
    """A quota and a per-lease rate where one dimension binds at `leases + fraction` leases
    and the other has `slack` times more room."""
    binding, other = (leases + fraction, (leases + fraction) * slack)
    per_lease_requests = requests / WINDOW_S / (other if tokens_bind else binding)
    per_lease_tokens = tokens / WINDOW_S / (binding if tokens_bind else other)
    rate = LeaseRate(per_lease_requests, per_lease_tokens / 4, per_lease_tokens * 3 / 4)
    return declared(requests, tokens), rate


def drain_s(quota_limits: dict[QuotaDimension, int], leases: int, rate: LeaseRate) -> float:
    """How long `leases` leases take to empty the first bucket they overdraw."""
    return min(
        quota_limits[d] / (leases * rate.spend(d) - quota_limits[d] / WINDOW_S)
        for d in quota_limits
        if leases * rate.spend(d) > quota_limits[d] / WINDOW_S
    )


binding_quotas = (
    requests_limits,
    token_limits,
    st.integers(1, 8),
    st.floats(0.01, 0.7),
    st.floats(1.0, 3.0),
    st.booleans(),
)


@settings(deadline=None, max_examples=40)
@given(*binding_quotas)
def test_a_spreading_share_of_the_whole_refill_never_drains_it_and_one_more_lease_does(
    requests: int, tokens: int, leases: int, fraction: float, slack: float, tokens_bind: bool
) -> None:
    quota, rate = binding_at(requests, tokens, leases, fraction, slack, tokens_bind)
    ceiling = sustained_leases(quota, rate, share=1.0)
    assert ceiling == leases
    limits: dict[QuotaDimension, int] = {"requests": requests, "tokens": tokens}
    one_more = drain_s(limits, ceiling + 1, rate)
    assert not drains(quota, ceiling, rate, horizon_s=2 * one_more + WINDOW_S)
    assert drains(quota, ceiling + 1, rate, horizon_s=one_more + 1)


@settings(deadline=None, max_examples=40)
@given(*binding_quotas)
def test_the_whole_ceiling_is_the_fewest_leases_that_use_the_whole_refill(
    requests: int, tokens: int, leases: int, fraction: float, slack: float, tokens_bind: bool
) -> None:
    """A saturated pool's account is never left with refill nobody asks for: its ceiling's
    leases drain the bucket (the proxy holds their excess back), one fewer would not."""
    quota, rate = binding_at(requests, tokens, leases, fraction, slack, tokens_bind)
    ceiling = sustained_leases(quota, rate)
    assert ceiling == leases + 1
    limits: dict[QuotaDimension, int] = {"requests": requests, "tokens": tokens}
    at_ceiling = drain_s(limits, ceiling, rate)
    assert drains(quota, ceiling, rate, horizon_s=at_ceiling + 1)
    assert not drains(quota, ceiling - 1, rate, horizon_s=2 * at_ceiling + WINDOW_S)


@given(requests_limits, token_limits, rates, st.floats(0.1, 1.0))
def test_a_spreading_share_never_exceeds_the_whole_ceiling(
    requests: int, tokens: int, rate: LeaseRate, share: float
) -> None:
    quota = declared(requests, tokens)
    assert (sustained_leases(quota, rate, share) or 0) <= (sustained_leases(quota, rate) or 0)


@given(requests_limits, token_limits, rates, st.floats(1.01, 10))
def test_a_lease_that_spends_more_never_raises_the_ceiling(
    requests: int, tokens: int, rate: LeaseRate, factor: float
) -> None:
    quota = declared(requests, tokens)
    hungrier = LeaseRate(
        rate.requests_per_s * factor,
        rate.input_tokens_per_s * factor,
        rate.output_tokens_per_s * factor,
    )
    assert (sustained_leases(quota, hungrier) or 0) <= (sustained_leases(quota, rate) or 0)


@given(requests_limits, token_limits, rates, st.one_of(st.none(), st.integers(1, 50)))
def test_the_operators_ceiling_bounds_the_adaptive_one(
    requests: int, tokens: int, rate: LeaseRate, capacity: int | None
) -> None:
    quota = declared(requests, tokens)
    ceiling = effective_ceiling(quota, rate, capacity)
    sustained = sustained_leases(quota, rate)
    assert ceiling is not None
    if capacity is not None:
        assert ceiling <= capacity
    assert ceiling <= (sustained or ceiling)
    assert effective_ceiling(None, rate, capacity) == capacity
    assert effective_ceiling(quota, None, capacity) == capacity


@given(
    st.integers(1, 1000),
    st.floats(0.5, 120),
    st.integers(0, 20),
    st.floats(0, 100),
)
def test_an_empty_bucket_names_the_moment_room_comes(
    limit: int, reset_in: float, live: int, wait: float
) -> None:
    """Under a simulated clock: no room before the named moment, room from it on."""
    quota = Quota("a", "m", {"requests": Bucket(limit, 0, T0 + reset_in)}, "headers", T0)
    room = quota_room(quota, None, live, T0)
    assert room is not None
    assert not room.lease_bound  # the refill's own moment
    when = room.at
    assert T0 < when <= T0 + reset_in
    assert quota_room(quota, None, live, when + 1e-6) is None  # float rounding aside
    earlier = T0 + (when - T0) * min(wait, 99) / 100
    if earlier < when - 1e-6:
        assert quota_room(quota, None, live, earlier) is not None


def test_at_the_sustained_ceiling_room_is_expected_when_a_lease_turns_over() -> None:
    quota = declared(60, 60_000)  # 6 requests, 6,000 tokens a second
    rate = LeaseRate(1.0, 500.0, 500.0)  # a lease: one request, 1,000 tokens a second
    assert sustained_leases(quota, rate) == 6
    assert sustained_leases(quota, rate, share=0.8) == 4
    assert quota_room(quota, rate, 5, T0) is None
    # that second is a guess (some lease ends), unlike an empty bucket's named refill
    assert quota_room(quota, rate, 6, T0) == Room(T0 + 1.0, lease_bound=True)
    assert quota_room(None, rate, 1_000, T0) is None  # nothing learned: room
    empty = Quota("a", "m", {"requests": Bucket(60, 0, T0 + 60.0)}, "headers", T0)
    room = quota_room(empty, rate, 0, T0)
    assert room is not None
    assert not room.lease_bound


def test_nothing_measured_or_no_limit_known_bounds_nothing() -> None:
    assert sustained_leases(declared(60, 60_000), None) is None
    unknown = Quota("a", "m", {"requests": Bucket(None, 5, None)}, "headers", T0)
    assert sustained_leases(unknown, LeaseRate(1, 1, 1)) is None


@given(st.lists(rates, min_size=1, max_size=30), st.floats(0.05, 1.0))
def test_the_moving_average_stays_within_its_samples(
    samples: list[LeaseRate], alpha: float
) -> None:
    average: LeaseRate | None = None
    for sample in samples:
        average = smoothed(average, sample, alpha)
    assert average is not None
    low = min(s.requests_per_s for s in samples)
    high = max(s.requests_per_s for s in samples)
    assert low - 1e-9 <= average.requests_per_s <= high + 1e-9


@given(rates, st.floats(0.05, 1.0))
def test_a_steady_spend_is_learned(rate: LeaseRate, alpha: float) -> None:
    average = smoothed(None, LeaseRate(0, 0, 0), alpha)
    for _ in range(200):
        average = smoothed(average, rate, alpha)
    assert math.isclose(average.requests_per_s, rate.requests_per_s, rel_tol=1e-3)


@given(
    rates,
    st.lists(st.tuples(rates, st.floats(0.1, 500.0)), min_size=1, max_size=20),
    st.floats(0.1, 100.0),
)
def test_while_little_is_measured_the_average_is_the_lease_second_weighted_mean(
    prior: LeaseRate, samples: list[tuple[LeaseRate, float]], prior_lease_seconds: float
) -> None:
    """With no floor (alpha 0) folding samples by `sample_weight` is exactly the mean of the
    prior (worth `prior_lease_seconds`) and every sample, each weighted by its lease-seconds:
    the average leaves the prior as fast as the pair's own measurements outweigh it."""
    average, seen = prior, 0.0
    for sample, lease_seconds in samples:
        average = smoothed(
            average, sample, sample_weight(lease_seconds, seen, prior_lease_seconds, 0.0)
        )
        seen += lease_seconds
    weighted = prior.requests_per_s * prior_lease_seconds + sum(
        s.requests_per_s * ls for s, ls in samples
    )
    assert average.requests_per_s == pytest.approx(
        weighted / (prior_lease_seconds + seen), rel=1e-6, abs=1e-9
    )


@given(st.floats(0.0, 1e6), st.floats(0.0, 1e6), st.floats(0.1, 1e3), st.floats(0.05, 1.0))
def test_a_samples_weight_is_never_below_alpha_nor_above_one(
    lease_seconds: float, seen: float, prior_lease_seconds: float, alpha: float
) -> None:
    weight = sample_weight(lease_seconds, seen, prior_lease_seconds, alpha)
    if lease_seconds == 0:
        assert weight == 0.0  # no lease was live: nothing measured
    else:
        assert alpha <= weight <= 1.0


def test_a_sample_is_the_spend_over_the_lease_seconds() -> None:
    assert sampled(20, 4_000, 1_000, 10.0) == LeaseRate(2.0, 400.0, 100.0)
    assert sampled(5, 5, 5, 0.0) is None  # no lease was live


@settings(max_examples=200)
@given(
    leases=st.integers(1, 40),
    wanted_per_lease=st.floats(0.2, 2.0),
    refill=st.floats(1.0, 10.0),
)
def test_a_throttled_account_measures_what_a_lease_wants_so_its_ceiling_binds(
    leases: int, wanted_per_lease: float, refill: float
) -> None:
    """A throttled account sends only what its quota lets through, whatever the leases: spend
    per lease-second is refill / leases, so a ceiling from it would be `leases` and never
    bind. Each lease spends the rest of its time waiting out the proxy's refusals; over the
    time left it sends at its own pace, so the measured rate is that pace (nothing is
    measured when the leases did little but wait) and the ceiling the fewest leases whose
    pace meets the refill, however many leases were live."""
    seconds = 10.0
    sent = math.floor(min(leases * wanted_per_lease * seconds, refill * seconds))
    waited = leases * seconds - sent / wanted_per_lease
    quota = declared(round(refill * WINDOW_S), 10**9)
    rate = sampled(sent, sent * 100, sent * 10, leases * seconds, waited)
    if rate is None:
        assert waited > 0.9 * leases * seconds - 1e-9
        return
    assert math.isclose(rate.requests_per_s, wanted_per_lease, rel_tol=1e-9)
    ceiling = sustained_leases(quota, rate)
    sustained = round(refill * WINDOW_S) / WINDOW_S / wanted_per_lease
    assert max(1, math.ceil(sustained - 1e-6)) <= (ceiling or 0) <= max(1, math.ceil(sustained))


def test_leases_that_did_little_but_wait_measure_nothing() -> None:
    assert sampled(20, 4_000, 1_000, 10.0, waited_s=5.0) == LeaseRate(4.0, 800.0, 200.0)
    assert sampled(0, 0, 0, 10.0, waited_s=3.0) is None
    assert sampled(1, 10, 10, 10.0, waited_s=9.5) is None  # little but waits: not measured
    assert sampled(1, 10, 10, 10.0, waited_s=100.0) is None


@settings(deadline=None, max_examples=40)
@given(st.lists(rates, min_size=1, max_size=6))
def test_the_prior_is_the_mean_of_the_pools_measured_leases(measured: list[LeaseRate]) -> None:
    prior = prior_rate(measured, default_prior(1.0))
    assert prior is not None
    low = min(r.requests_per_s for r in measured)
    high = max(r.requests_per_s for r in measured)
    assert low - 1e-9 <= prior.requests_per_s <= high + 1e-9
    mean = sum(r.tokens_per_s for r in measured) / len(measured)
    assert prior.tokens_per_s == pytest.approx(mean)


def test_before_anything_is_measured_the_prior_is_the_default_or_nothing() -> None:
    assert prior_rate([], default_prior(0.5)) == LeaseRate(0.5, 500.0, 128.0)
    assert prior_rate([], None) is None


@settings(deadline=None, max_examples=40)
@given(requests_limits, token_limits, st.floats(0.05, 3.0))
def test_a_known_quota_with_the_default_prior_binds_from_the_first_lease(
    requests: int, tokens: int, requests_per_s: float
) -> None:
    """A pair nothing was measured of: the ceiling is what its refill sustains at the prior,
    so leases beyond it go elsewhere (simulated clock: the spreading share's leases never
    drain it when the prior is what the leases really spend)."""
    quota = declared(requests, tokens)
    prior = default_prior(requests_per_s)
    ceiling = sustained_leases(quota, prior)
    spread = sustained_leases(quota, prior, share=1.0)
    assert ceiling is not None
    assert spread is not None
    raw = min(requests / WINDOW_S / prior.requests_per_s, tokens / WINDOW_S / prior.tokens_per_s)
    assert ceiling == max(1, math.ceil(raw - 1e-9))
    assert spread == max(1, math.floor(raw + 1e-9))
    assert quota_room(quota, prior, ceiling, T0) is not None  # the next lease goes elsewhere
    assert quota_room(quota, prior, ceiling - 1, T0) is None
    assert quota_room(quota, prior, spread, T0, share=1.0) is not None
    if raw >= 1:
        assert not drains(quota, spread, prior, horizon_s=4 * WINDOW_S)


def test_a_wait_for_the_bucket_is_named_but_none_at_the_sustained_ceiling() -> None:
    empty = Quota("a", "m", {"requests": Bucket(60, 0, T0 + 30)}, "headers", T0)
    assert quota_wait(empty, None, 0, T0) == pytest.approx(T0 + 0.5)  # 2 a second refill
    full = declared(20, 20_000)
    one = LeaseRate(1.0, 500.0, 500.0)  # sustains 2 leases
    assert quota_wait(full, one, 1, T0) is None
    assert quota_wait(full, one, 2, T0) == math.inf
    assert quota_wait(None, one, 99, T0) is None
