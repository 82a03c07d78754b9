"""The fleet benchmark's mock upstream (bench/fleet/buckets.py) keeps a provider's arithmetic:
buckets that start empty and refill continuously, a request admitted only whole, and headers
in the providers' own formats. If this drifts, `make bench-fleet` measures something else."""

from __future__ import annotations

import math
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fleet.buckets import (
    Bucket,
    admit,
    anthropic_headers,
    go_duration,
    openai_headers,
    retry_after,
    rfc3339,
)
from bench.fleet.workload import ACCOUNTS, TENANTS, blended_mix, maximum, pace


def test_a_bucket_starts_empty_and_refills_at_capacity_per_window() -> None:
    bucket = Bucket(capacity=100, window_s=10, at=0.0)
    assert bucket.remaining(0.0) == 0
    assert bucket.remaining(2.5) == 25
    assert bucket.full_in(2.5) == pytest.approx(7.5)
    assert bucket.remaining(60.0) == 100  # never above its capacity


def test_a_request_is_admitted_whole_or_charged_nothing() -> None:
    buckets = {"requests": Bucket(10, 10, at=0.0), "tokens": Bucket(1000, 10, at=0.0)}
    # at 5 s: 5 requests, 500 tokens of room; 600 tokens lack 100, i.e. 1 s of refill
    assert admit(buckets, {"requests": 1, "tokens": 600}, 5.0) == pytest.approx(1.0)
    assert buckets["requests"].remaining(5.0) == 5  # the refused request took nothing
    assert admit(buckets, {"requests": 1, "tokens": 400}, 5.0) == 0.0
    assert buckets["requests"].remaining(5.0) == 4
    assert buckets["tokens"].remaining(5.0) == 100
    assert admit(buckets, {"tokens": 5000}, 5.0) == math.inf  # larger than the bucket


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(1, 10_000),
    window=st.floats(0.5, 60),
    steps=st.lists(st.tuples(st.floats(0, 5), st.integers(1, 2_000)), max_size=60),
)
def test_what_is_admitted_never_exceeds_the_refill(
    capacity: int, window: float, steps: list[tuple[float, int]]
) -> None:
    """Empty at start, so by time t at most capacity / window x t units were ever admitted;
    a refusal's wait is exactly what makes the same request fit."""
    bucket = Bucket(float(capacity), window, at=0.0)
    now = 0.0
    admitted = 0.0
    for gap, cost in steps:
        now += gap
        before = bucket.remaining(now)
        wait = admit({"b": bucket}, {"b": cost}, now)
        if wait == 0.0:
            admitted += cost
        elif wait < math.inf:
            assert bucket.remaining(now) == before
            probe = Bucket(bucket.capacity, window, bucket.level, bucket.at)
            assert admit({"b": probe}, {"b": cost}, now + wait + 1e-9) == 0.0
        assert admitted <= capacity / window * now + 1e-6
        assert 0.0 <= bucket.level <= capacity + 1e-9


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.35, "350ms"),
        (0.0004, "1ms"),  # rounded up: never earlier than the refill
        (1.2, "1.2s"),
        (12.0, "12s"),
        (60.0, "1m0s"),
        (360.0, "6m0s"),
        (61.5, "1m1.5s"),
        (3723.25, "1h2m3.25s"),
    ],
)
def test_resets_are_go_durations_as_openai_sends_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_openai_headers_name_both_buckets() -> None:
    buckets = {"requests": Bucket(40, 10, at=0.0), "tokens": Bucket(80_000, 10, at=0.0)}
    admit(buckets, {"requests": 1, "tokens": 2_000}, 4.0)
    assert openai_headers(buckets, 4.0) == {
        "x-ratelimit-limit-requests": "40",
        "x-ratelimit-remaining-requests": "15",
        "x-ratelimit-reset-requests": "6.25s",
        "x-ratelimit-limit-tokens": "80000",
        "x-ratelimit-remaining-tokens": "30000",
        "x-ratelimit-reset-tokens": "6.25s",
    }


def test_anthropic_headers_are_rfc3339_and_tokens_repeat_the_tightest() -> None:
    buckets = {
        "requests": Bucket(50, 10, at=0.0),
        "input-tokens": Bucket(60_000, 10, at=0.0),
        "output-tokens": Bucket(1_000, 10, at=0.0),
    }
    wall = datetime.fromisoformat("2026-12-02T04:00:00+00:00").timestamp()
    headers = anthropic_headers(buckets, 5.0, wall + 0.2)
    assert headers["anthropic-ratelimit-requests-remaining"] == "25"
    assert headers["anthropic-ratelimit-requests-reset"] == "2026-12-02T04:00:06Z"
    assert headers["anthropic-ratelimit-output-tokens-remaining"] == "500"
    assert headers["anthropic-ratelimit-tokens-limit"] == "1000"
    assert headers["anthropic-ratelimit-tokens-remaining"] == "500"
    assert rfc3339(wall) == "2026-12-02T04:00:00Z"


def test_retry_after_is_whole_seconds_rounded_up() -> None:
    assert [retry_after(s) for s in (0.01, 1.0, 1.2, 6.5)] == ["1", "1", "2", "7"]


def test_the_pool_binds_on_requests_for_some_accounts_and_tokens_for_others() -> None:
    """The issue's shape: unequal accounts, requests binding on some, tokens on others; and
    the fleet's turns fit every bucket (a turn larger than a bucket could never be served)."""
    paces = {t.name: pace(t, samples=300) for t in TENANTS}
    mix, tokens = blended_mix(paces, {t.name: t.share for t in TENANTS})
    bound = {binding for _, binding in maximum(ACCOUNTS, mix, tokens).per_account.values()}
    assert "requests" in bound
    assert bound - {"requests"}
    for tenant in TENANTS:  # the largest turn a task can have: every draw at its maximum
        largest = (
            tenant.first_prompt[1]
            + (tenant.turns[1] - 1) * (tenant.added[1] + tenant.output[1])
            + tenant.output[1]
        )
        for account in ACCOUNTS:
            for name, cap in account.limits.items():
                need = {"requests": 1, "output-tokens": tenant.output[1]}.get(name, largest)
                assert cap >= 2 * need, (account.id, name)
