"""Rate-limit headers of every family, read into quota buckets: each format, garbage,
missing headers and a provider clock that differs from ours."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.providers import kind_named
from leasegate.providers.ratelimits import (
    MAX_RESET_S,
    anthropic_buckets,
    openai_buckets,
    parse_count,
    parse_duration,
    rate_limit_wait_s,
)

NOW = 1_772_366_400.0  # 2026-03-01T12:00:00Z


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1.2s", 1.2),
        ("350ms", 0.35),
        ("1h2m3.5s", 3723.5),
        ("2m59.56s", 179.56),
        ("0s", 0.0),
        ("20ms", 0.02),
        ("1m", 60.0),
        ("1.5", 1.5),
    ],
)
def test_openai_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "s", "ms", "-1s", "1x", "1s2h", "abc", "1e309", "nan", "1" * 40]
)
def test_unreadable_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


@given(st.text(max_size=40))
def test_any_text_is_a_duration_or_none_never_an_error(text: str) -> None:
    seconds = parse_duration(text)
    assert seconds is None or seconds >= 0


@given(st.text(max_size=20))
def test_any_text_is_a_count_or_none(text: str) -> None:
    count = parse_count(text)
    assert count is None or count >= 0


def test_openai_headers() -> None:
    headers = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert kind_named("openai").quota_buckets(headers, NOW) == {
        "requests": Bucket(500, 499, NOW + 0.12),
        "tokens": Bucket(30000, 29000, NOW + 360.0),
    }


def test_azure_remaining_without_limit_or_reset() -> None:
    headers = {"x-ratelimit-remaining-requests": "9", "x-ratelimit-remaining-tokens": "1200"}
    assert kind_named("azure-openai").quota_buckets(headers, NOW) == {
        "requests": Bucket(None, 9, None),
        "tokens": Bucket(None, 1200, None),
    }


def test_anthropic_headers_read_against_the_answers_own_date() -> None:
    # the provider's clock is 30 s ahead of ours: only the distance to its reset counts
    headers = {
        "date": "Sun, 01 Mar 2026 12:00:30 GMT",
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-03-01T12:00:31.5Z",
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
        "anthropic-ratelimit-input-tokens-reset": "2026-03-01T12:00:32+00:00",
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "8000",
    }
    assert kind_named("anthropic").quota_buckets(headers, NOW) == {
        "requests": Bucket(50, 0, NOW + 1.5),
        "input-tokens": Bucket(40000, 39000, NOW + 2.0),
        "output-tokens": Bucket(8000, 8000, None),
    }


def test_anthropics_tokens_headers_mirror_the_tighter_bucket_and_are_left_out_beside_them() -> None:
    """An account with room for a request of 2,000 input and 200 output tokens: `tokens`
    repeats the output bucket (the tighter), which would refuse 2,200 tokens as a sum."""
    headers = {
        "anthropic-ratelimit-input-tokens-limit": "60000",
        "anthropic-ratelimit-input-tokens-remaining": "30000",
        "anthropic-ratelimit-output-tokens-limit": "12000",
        "anthropic-ratelimit-output-tokens-remaining": "1000",
        "anthropic-ratelimit-tokens-limit": "12000",
        "anthropic-ratelimit-tokens-remaining": "1000",
    }
    found = anthropic_buckets(headers, NOW)
    assert set(found) == {"input-tokens", "output-tokens"}
    quota = Quota("a", "m", found, "headers", NOW)
    assert quota.room_at(1, 2_200, NOW, input_tokens=2_000, output_tokens=200) is None


def test_anthropic_without_a_date_uses_our_clock_and_a_past_reset_means_full() -> None:
    headers = {
        "anthropic-ratelimit-tokens-limit": "100",
        "anthropic-ratelimit-tokens-remaining": "10",
        "anthropic-ratelimit-tokens-reset": "2026-03-01T11:59:00Z",
    }
    assert anthropic_buckets(headers, NOW) == {"tokens": Bucket(100, 10, NOW)}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-ratelimit-remaining-requests": "lots", "x-ratelimit-limit-requests": "-5"},
        {"x-ratelimit-remaining-tokens": "1.5", "x-ratelimit-limit-tokens": ""},
        {"x-ratelimit-reset-requests": "1s"},  # a reset alone says nothing of a bucket
    ],
)
def test_missing_or_garbage_openai_headers_give_no_bucket(headers: dict[str, str]) -> None:
    assert openai_buckets(headers, NOW) == {}


def test_garbage_parts_are_dropped_part_by_part() -> None:
    headers = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "7",
        "x-ratelimit-reset-requests": "soon",
        "x-ratelimit-remaining-tokens": "900",
        "x-ratelimit-limit-tokens": "500",  # remaining above the limit: capped
        "x-ratelimit-reset-tokens": f"{MAX_RESET_S * 2}s",  # beyond belief: dropped
    }
    assert openai_buckets(headers, NOW) == {
        "requests": Bucket(100, 7, None),
        "tokens": Bucket(500, 500, None),
    }
    bad_time = {
        "anthropic-ratelimit-tokens-remaining": "5",
        "anthropic-ratelimit-tokens-reset": "2026-03-01T12:00:31",  # no offset: not believed
    }
    assert anthropic_buckets(bad_time, NOW) == {"tokens": Bucket(None, 5, None)}


def test_kinds_without_headers_read_none() -> None:
    assert kind_named("gemini").quota_buckets({"x-ratelimit-remaining-requests": "0"}, NOW) == {}


def test_a_429s_wait() -> None:
    assert rate_limit_wait_s({"retry-after-ms": "350", "retry-after": "9"}, {}, NOW) == 0.35
    assert rate_limit_wait_s({"retry-after": "2"}, {}, NOW) == 2.0
    dated = {
        "retry-after": "Sun, 01 Mar 2026 12:00:40 GMT",
        "date": "Sun, 01 Mar 2026 12:00:30 GMT",
    }
    assert rate_limit_wait_s(dated, {}, NOW) == 10.0
    empty: dict[QuotaDimension, Bucket] = {
        "tokens": Bucket(100, 0, NOW + 4.0),
        "requests": Bucket(10, 3, NOW + 9.0),
    }
    assert rate_limit_wait_s({}, empty, NOW) == 4.0  # only an empty bucket's reset counts
    assert rate_limit_wait_s({"retry-after": "later"}, {}, NOW) is None
    assert rate_limit_wait_s({}, {}, NOW) is None


@given(
    limit=st.integers(0, 10**9),
    remaining=st.integers(0, 10**9),
    reset_s=st.floats(0, 3600, allow_nan=False),
    skew=st.floats(-600, 600, allow_nan=False),
)
def test_a_skewed_provider_clock_never_moves_the_wait(
    limit: int, remaining: int, reset_s: float, skew: float
) -> None:
    their_now = int(NOW + skew)  # `date` has whole seconds
    reset = datetime.fromtimestamp(their_now + reset_s, UTC).isoformat()
    headers = {
        "date": format_datetime(datetime.fromtimestamp(their_now, UTC), usegmt=True),
        "anthropic-ratelimit-tokens-limit": str(limit),
        "anthropic-ratelimit-tokens-remaining": str(remaining),
        "anthropic-ratelimit-tokens-reset": reset,
    }
    bucket = anthropic_buckets(headers, NOW)["tokens"]
    assert bucket.reset_at == pytest.approx(NOW + reset_s, abs=1e-3)
    assert bucket.remaining is not None
    assert bucket.remaining <= limit
