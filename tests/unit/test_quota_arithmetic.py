"""The proxy's quota arithmetic: estimates, spending, reconciliation, a rate-limit hold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import DeclaredLimits
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.routing.lease_ceiling import refill_rate
from leasegate.routing.quota import (
    DEFAULT_OUTPUT_TOKENS,
    JITTER_MAX_S,
    Estimate,
    declared_quota,
    estimate,
    hold_s,
    learned,
    output_cap,
    rate_limit_hold,
    ratelimit_fields,
    reconciled,
    returned,
    room_at,
    spent,
)

T0 = 1_000.0


def _tokens(limit: int, remaining: int, reset_in: float = 60.0) -> Quota:
    return Quota("a", "m", {"tokens": Bucket(limit, remaining, T0 + reset_in)}, "headers", T0)


def test_the_estimate_reads_the_body_size_and_the_output_cap() -> None:
    assert output_cap({"max_tokens": 100}) == 100
    assert output_cap({"max_completion_tokens": 50}) == 50
    assert output_cap({"max_output_tokens": 70}) == 70
    assert output_cap({"generationConfig": {"maxOutputTokens": 30}}) == 30
    assert output_cap({"max_tokens": "lots"}) is None
    assert output_cap({"max_tokens": True}) is None
    assert estimate(400, 100, None) == Estimate(100, 100)
    assert estimate(401, None, 64) == Estimate(101, 64)
    assert estimate(0, None, None) == Estimate(0, DEFAULT_OUTPUT_TOKENS)


def test_spending_lowers_the_view_so_concurrent_requests_see_each_other() -> None:
    quota = _tokens(10_000, 1_000, reset_in=10_000.0)  # ~1 token a second refill
    cost = Estimate(300, 200)
    once = spent(quota, cost, T0)
    assert once.remaining_at("tokens", T0) == 500
    assert room_at(once, cost, T0) is None
    twice = spent(once, cost, T0)
    assert room_at(twice, cost, T0) is not None  # the third one does not fit


def test_reconciliation_gives_back_a_generous_estimate_and_takes_a_short_one() -> None:
    quota = spent(_tokens(10_000, 1_000, 10_000.0), Estimate(100, 400), T0)
    assert quota.remaining_at("tokens", T0) == 500
    assert reconciled(quota, Estimate(100, 400), 100, 50, T0).remaining_at("tokens", T0) == 850
    assert reconciled(quota, Estimate(100, 400), 300, 700, T0).remaining_at("tokens", T0) == 0
    # unknown usage keeps the estimate
    assert reconciled(quota, Estimate(100, 400), None, None, T0) is quota


def test_a_request_that_never_left_is_given_back_whole() -> None:
    quota = Quota(
        "a",
        "m",
        {"requests": Bucket(10, 1, T0 + 60), "tokens": Bucket(1_000, 900, T0 + 60)},
        "headers",
        T0,
    )
    cost = Estimate(100, 100)
    back = returned(spent(quota, cost, T0), cost, T0)
    assert back.remaining_at("requests", T0) == 1
    assert back.remaining_at("tokens", T0) == 900


def test_headers_replace_their_dimensions_and_keep_declared_ones() -> None:
    declared = declared_quota("a", "m", DeclaredLimits(rpm=60, tpm=6_000), T0)
    assert declared is not None
    heard = learned(declared, "a", "m", {"requests": Bucket(100, 42, T0 + 5)}, T0 + 1)
    assert heard.source == "headers"
    assert heard.buckets["requests"] == Bucket(100, 42, T0 + 5)
    assert heard.buckets["tokens"].limit == 6_000


def test_a_rate_limit_hold_admits_nothing_until_exactly_its_end() -> None:
    hold = rate_limit_hold(None, "a", "m", {}, T0 + 0.6, T0)
    assert room_at(hold, Estimate(1, 1), T0) == T0 + 0.6
    assert room_at(hold, Estimate(1, 1), T0 + 0.599) == T0 + 0.6
    assert room_at(hold, Estimate(1, 1), T0 + 0.6) is None


@given(wait=st.floats(0, 600), jitter=st.floats(0, 0.999))
def test_the_hold_is_the_wait_plus_a_small_jitter_never_the_base(
    wait: float, jitter: float
) -> None:
    held = hold_s(wait, jitter)
    assert wait <= held <= wait + min(JITTER_MAX_S, 0.1 * wait) + 1e-9


@given(
    limit=st.integers(1, 100_000),
    remaining=st.integers(0, 100_000),
    costs=st.lists(
        st.tuples(st.integers(0, 5_000), st.integers(0, 5_000), st.integers(0, 10_000)),
        max_size=20,
    ),
)
def test_reconciled_spending_equals_spending_the_actual_usage(
    limit: int, remaining: int, costs: list[tuple[int, int, int]]
) -> None:
    """Estimate, then reconcile with the usage: the view ends where spending the actual
    usage would have left it (no refill: the reset is far away)."""
    remaining = min(remaining, limit)
    start = Quota("a", "m", {"tokens": Bucket(limit, remaining, None)}, "declared", T0)
    view = actual_view = start
    for est_in, est_out, actual in costs:
        cost = Estimate(est_in, est_out)
        view = reconciled(spent(view, cost, T0), cost, actual, 0, T0)
        actual_view = spent(actual_view, Estimate(actual, 0), T0)
    assert view.remaining_at("tokens", T0) == actual_view.remaining_at("tokens", T0)


def test_a_declared_quota_refills_over_a_minute() -> None:
    quota = declared_quota("a", "m", DeclaredLimits(rpm=2), T0)
    assert quota is not None
    one = Estimate(0, 0)
    quota = spent(spent(quota, one, T0), one, T0)
    assert room_at(quota, one, T0) == T0 + 30.0
    assert declared_quota("a", "m", DeclaredLimits(output_estimate=5), T0) is None


def test_a_declared_burst_holds_that_many_seconds_of_the_rate_and_refills_at_it() -> None:
    """`burst_s` 10 on 120 a minute: 20 at once, then two a second, as a provider enforcing
    its per-minute limit over 10 s windows (Azure) lets through."""
    quota = declared_quota("a", "m", DeclaredLimits(rpm=120, tpm=60_000, burst_s=10), T0)
    assert quota is not None
    assert quota.buckets["requests"] == Bucket(20, 20, None, 10.0)
    assert quota.buckets["tokens"] == Bucket(10_000, 10_000, None, 10.0)
    one = Estimate(0, 0)
    for _ in range(20):
        assert room_at(quota, one, T0) is None
        quota = spent(quota, one, T0)
    assert room_at(quota, one, T0) == pytest.approx(T0 + 0.5)
    assert refill_rate(quota.buckets["requests"], T0) == 2.0


def test_ratelimit_fields_never_say_more_than_the_provider() -> None:
    quota = Quota(
        "a",
        "m",
        {
            "requests": Bucket(100, 10, T0 + 6.2),
            "tokens": Bucket(None, 0, T0 + 1.5),  # a rate-limit hold
            "output-tokens": Bucket(8_000, None, None),
        },
        "headers",
        T0,
    )
    policy, state = ratelimit_fields(quota, T0 + 0.1) or ("", "")
    assert policy == '"requests";q=100;qu="requests", "output-tokens";q=8000;qu="tokens"'
    # 10 + 90 x 0.1/6.2 = 11.45 -> 11; 6.1 s -> 7; the hold: 0 left for 1.4 s -> 2
    assert state == '"requests";r=11;t=7, "tokens";r=0;t=2'
    declared = declared_quota("a", "m", DeclaredLimits(rpm=60), T0)
    assert declared is not None
    assert ratelimit_fields(spent(declared, Estimate(0, 0), T0), T0) == (
        '"requests";q=60;qu="requests";w=60',
        '"requests";r=59;t=1',
    )
    assert ratelimit_fields(Quota("a", "m", {}, "headers", T0), T0) is None


@given(
    limit=st.integers(1, 10_000),
    window=st.floats(1.0, 600.0),
    wait=st.floats(0.01, 60.0),
)
def test_a_hold_keeps_the_known_request_rate_and_admits_nothing_before_its_end(
    limit: int, window: float, wait: float
) -> None:
    """The 429's headers say the requests bucket's limit and when it is full: the hold admits
    no request before its end, one at its end, and the bucket still says (about) how fast it
    refills: exactly as fast as before it (a headerless account's view is never corrected by
    a later answer: a rounded refill would stay)."""
    rate = limit / window
    headers: dict[QuotaDimension, Bucket] = {"requests": Bucket(limit, 0, T0 + window)}
    until = T0 + wait
    hold = rate_limit_hold(None, "a", "m", headers, until, T0)
    bucket = hold.buckets["requests"]
    assert bucket.limit == limit
    assert room_at(hold, Estimate(0, 0), T0) == pytest.approx(until, abs=1e-6)
    assert room_at(hold, Estimate(0, 0), until - 1e-3) is not None
    assert room_at(hold, Estimate(0, 0), until + 1e-6) is None
    assert bucket.reset_at is not None
    assert bucket.remaining is not None
    refill = (limit - bucket.remaining) / (bucket.reset_at - T0)
    assert refill == pytest.approx(rate, rel=1e-9)


@given(
    limit=st.integers(10, 10_000),
    fill=st.floats(0.0, 0.95),
    reset_in=st.floats(0.5, 60.0),
    spends=st.lists(st.tuples(st.floats(0.0, 0.5), st.integers(0, 50)), max_size=12),
)
def test_spending_from_a_headers_bucket_keeps_its_refill_rate(
    limit: int, fill: float, reset_in: float, spends: list[tuple[float, int]]
) -> None:
    """A provider's reset is when the bucket is full again: spending from the view moves it
    later, so the view refills at the provider's rate however much is spent, and never holds
    more than a real bucket refilling at that rate (a simulated clock), until it is full."""
    remaining = int(limit * fill)
    quota = Quota("a", "m", {"requests": Bucket(limit, remaining, T0 + reset_in)}, "headers", T0)
    rate = (limit - remaining) / reset_in
    real, now = float(remaining), T0
    for wait, count in spends:
        now += wait
        real = real + rate * wait
        if real >= limit:
            break  # observed full, a bucket tells no rate: the next answer's headers will
        quota = spent(quota, Estimate(0, 0, requests=count), now)
        real -= count
        bucket = quota.buckets["requests"]
        if bucket.remaining is not None and bucket.remaining < limit:
            assert refill_rate(bucket, quota.observed_at) == pytest.approx(rate, rel=1e-6)
        for ahead in (0.0, 0.3, 2.0):
            held = quota.remaining_at("requests", now + ahead)
            assert held is not None
            assert held <= min(float(limit), real + rate * ahead) + 1e-6


def test_ten_requests_in_debt_refill_at_the_providers_rate_not_faster() -> None:
    # 40 a 10 s window, empty, full again in 10 s: 4 a second
    quota = Quota("a", "m", {"requests": Bucket(40, 0, T0 + 10.0)}, "headers", T0)
    later = spent(quota, Estimate(0, 0, requests=10), T0 + 8.0)  # holds 32, then 22
    assert later.remaining_at("requests", T0 + 8.0) == 22
    assert later.remaining_at("requests", T0 + 9.0) == pytest.approx(26.0)
    assert later.buckets["requests"].reset_at == pytest.approx(T0 + 12.5)


@given(
    gaps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=300),
    rpm=st.integers(6, 600),
)
def test_a_declared_bucket_spent_request_by_request_keeps_every_fraction_of_its_refill(
    gaps: list[float], rpm: int
) -> None:
    """A headerless account's view is only ever spent and refilled (no answer corrects it):
    whatever the pace, what it holds is the continuous bucket's (refill since the last
    request, capped at the limit, less one per request). Rounded down at every request, a
    declared 120 a minute spent every 0.45 s drained a whole request a step instead of a
    fifth of one, and the proxy refused a fleet a fifth of the account's quota
    (docs/performance.md, 2026-12-05)."""
    quota = declared_quota("a", "m", DeclaredLimits(rpm=rpm), T0)
    assert quota is not None
    per_s = rpm / 60.0
    level, at = float(rpm), T0
    for gap in gaps:
        at += gap
        level = min(float(rpm), level + per_s * gap)
        if level < 1:
            assert room_at(quota, Estimate(0, 0), at) is not None
            continue
        assert room_at(quota, Estimate(0, 0), at) is None
        quota = spent(quota, Estimate(0, 0), at)
        level -= 1
        assert quota.remaining_at("requests", at) == pytest.approx(level, abs=1e-6)


def test_a_declared_bucket_spent_a_little_faster_than_it_refills_drains_at_the_difference() -> None:
    quota = declared_quota("a", "m", DeclaredLimits(rpm=120), T0)  # 2 a second
    assert quota is not None
    at = T0
    for _ in range(133):  # 60 s at one every 0.45 s: 2.22 a second
        at += 0.45
        assert room_at(quota, Estimate(0, 0), at) is None
        quota = spent(quota, Estimate(0, 0), at)
    held = quota.remaining_at("requests", at)
    # the first step's refill is lost to the full bucket's cap: 105.8 (rounded down: -13)
    assert held == pytest.approx(120 - 133 + 2 * 0.45 * 132, abs=1e-6)


@given(wait=st.floats(0.05, 5.0), spend_before=st.integers(0, 20))
def test_a_declared_bucket_held_by_a_429_lets_through_no_more_than_its_rate_after(
    wait: float, spend_before: int
) -> None:
    """A headerless account (declared 120 a minute, a 10 s burst: 2 a second, 20 at once)
    answers 429 with a `retry-after`: nothing corrects the view afterwards, so the hold must
    leave the bucket refilling at the declared rate. Spending as fast as the view allows for
    20 s after the hold lets through no more than a real 2-a-second bucket would."""
    declared = declared_quota("a", "m", DeclaredLimits(rpm=120, burst_s=10), T0)
    assert declared is not None
    view = declared
    for _ in range(spend_before):
        view = spent(view, Estimate(0, 0), T0)
    until = T0 + wait
    view = rate_limit_hold(view, "a", "m", {}, until, T0)
    assert view.source == "declared"  # the 429 told no limit: they are still the declared ones
    bound = 1 + 2 * 20 + 1  # one at the hold's end, 2 a second, a step's rounding
    admitted, now, step = 0, until, 0.01
    while now < until + 20.0 and admitted <= bound:  # a view that always has room stops here
        if room_at(view, Estimate(0, 0), now) is None:
            view = spent(view, Estimate(0, 0), now)
            admitted += 1
        else:
            now += step
    assert admitted <= bound
