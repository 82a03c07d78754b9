"""Rate-limit headers as each family of providers sends them, read into quota buckets.

OpenAI and the servers that copy it (OpenAI-compatible, OpenRouter, Azure OpenAI):

    x-ratelimit-limit-requests: 500          x-ratelimit-limit-tokens: 30000
    x-ratelimit-remaining-requests: 499      x-ratelimit-remaining-tokens: 29000
    x-ratelimit-reset-requests: 120ms        x-ratelimit-reset-tokens: 6m0s

The resets are durations until the bucket is full again (`1h2m3.5s`, `6m0s`, `1.2s`,
`350ms`; a bare number is seconds). Azure sends only the two `remaining` headers on many API
versions (no limit, no reset) and `retry-after-ms` on a 429.

Anthropic, per dimension (`requests`, `tokens`, `input-tokens`, `output-tokens`):

    anthropic-ratelimit-tokens-limit: 80000
    anthropic-ratelimit-tokens-remaining: 79000
    anthropic-ratelimit-tokens-reset: 2026-03-01T12:00:30Z      (RFC 3339: when it is full)

Anthropic's `tokens` headers repeat the most restrictive of its input and output token limits:
when those two are sent, `tokens` is left out (it limits neither their sum nor anything else).

An absolute reset is read against the answer's own `date` header when it has one, so a
provider clock that differs from ours moves nothing: only the distance from its `date` to
its reset counts. A reset further than `MAX_RESET_S` away, a negative or non-numeric count,
or an unreadable time is dropped, bucket part by bucket part; a bucket with nothing readable
is left out. Pure: the caller passes `now` and a case-insensitive mapping (or lower-case keys).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.core.retry_after import retry_after_seconds

MAX_RESET_S = 86_400.0
"""A reset further away than a day is not believed (garbage, or a clock gone wrong)."""

_DURATION = re.compile(
    r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m(?!s))?"
    r"(?:(?P<s>\d+(?:\.\d+)?)s)?(?:(?P<ms>\d+(?:\.\d+)?)ms)?"
)
_COUNT_MAX = 10**15


def parse_duration(value: str | None) -> float | None:
    """Seconds in a Go-style duration (`1h2m3.5s`, `6m0s`, `1.2s`, `350ms`) or a bare number
    of seconds; None when absent, empty, negative or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > 32:
        return None
    # the common shapes first, without the regex: `1.2s`, `350ms`, `1.5`
    if text.endswith("ms"):
        number, scale = text[:-2], 0.001
    elif text.endswith("s"):
        number, scale = text[:-1], 1.0
    else:
        number, scale = text, 1.0
    if number and number.replace(".", "", 1).isdigit() and number.isascii():
        return float(number) * scale
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groupdict().values()):
        return None
    parts = match.groupdict()
    seconds = (
        float(parts["h"] or 0) * 3600
        + float(parts["m"] or 0) * 60
        + float(parts["s"] or 0)
        + float(parts["ms"] or 0) / 1000
    )
    return seconds if math.isfinite(seconds) else None


def parse_count(value: str | None) -> int | None:
    """A non-negative integer count; None when absent or anything else."""
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        return None
    count = int(text)
    return count if count < _COUNT_MAX else None


def parse_instant(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 time with its offset (`Z` or `+hh:mm`); None otherwise."""
    if value is None or len(value) > 40:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None  # a time without an offset is ambiguous: not believed
    return when.timestamp()


def provider_now(headers: Mapping[str, str], now: float) -> float:
    """The provider's clock when it answered: its `date` header, else ours."""
    value = headers.get("date")
    if value is None:
        return now
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return now
    if when.tzinfo is None:
        return now
    return when.timestamp()


def _bucket(
    limit: int | None, remaining: int | None, wait_s: float | None, now: float
) -> Bucket | None:
    if wait_s is not None and not 0 <= wait_s <= MAX_RESET_S:
        wait_s = None
    if limit is not None and remaining is not None and remaining > limit:
        remaining = limit
    if limit is None and remaining is None:
        return None
    return Bucket(limit, remaining, None if wait_s is None else now + wait_s)


_OPENAI_HEADERS: tuple[tuple[QuotaDimension, str, str, str], ...] = tuple(
    (
        dimension,
        "x-ratelimit-remaining-" + dimension,
        "x-ratelimit-limit-" + dimension,
        "x-ratelimit-reset-" + dimension,
    )
    for dimension in ("requests", "tokens")
)


def openai_buckets(headers: Mapping[str, str], now: float) -> dict[QuotaDimension, Bucket]:
    """`x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (reset optional: Azure)."""
    found: dict[QuotaDimension, Bucket] = {}
    get = headers.get
    for dimension, remaining_name, limit_name, reset_name in _OPENAI_HEADERS:
        remaining = parse_count(get(remaining_name))
        limit = parse_count(get(limit_name))
        if remaining is None and limit is None:
            continue
        wait = parse_duration(get(reset_name))
        if (bucket := _bucket(limit, remaining, wait, now)) is not None:
            found[dimension] = bucket
    return found


_ANTHROPIC_DIMENSIONS: tuple[QuotaDimension, ...] = (
    "requests",
    "tokens",
    "input-tokens",
    "output-tokens",
)


def anthropic_buckets(headers: Mapping[str, str], now: float) -> dict[QuotaDimension, Bucket]:
    """`anthropic-ratelimit-{dimension}-{limit,remaining,reset}`, the reset an RFC 3339 time
    read against the answer's `date`."""
    found: dict[QuotaDimension, Bucket] = {}
    get = headers.get
    their_now: float | None = None
    for dimension in _ANTHROPIC_DIMENSIONS:
        stem = "anthropic-ratelimit-" + dimension
        remaining = parse_count(get(stem + "-remaining"))
        limit = parse_count(get(stem + "-limit"))
        if remaining is None and limit is None:
            continue
        wait = None
        if (reset := parse_instant(get(stem + "-reset"))) is not None:
            if their_now is None:
                their_now = provider_now(headers, now)
            wait = max(0.0, reset - their_now)
        if (bucket := _bucket(limit, remaining, wait, now)) is not None:
            found[dimension] = bucket
    if "input-tokens" in found and "output-tokens" in found:
        # `tokens` repeats whichever of the two is most restrictive: not a limit on their
        # sum, so holding input + output against it would throttle an account that has room
        found.pop("tokens", None)
    return found


def rate_limit_wait_s(
    headers: Mapping[str, str], buckets: Mapping[QuotaDimension, Bucket], now: float
) -> float | None:
    """How long a 429 asks to wait: `retry-after-ms`, else `retry-after` (seconds or an HTTP
    date, read against the answer's own `date`: `leasegate.core.retry_after`), else the latest
    reset of an empty bucket; None when the answer says nothing about it."""
    their_now = datetime.fromtimestamp(provider_now(headers, now), UTC)
    asked = retry_after_seconds(headers, their_now)
    if asked is not None:
        return min(asked, MAX_RESET_S)
    resets = [
        b.reset_at - now
        for b in buckets.values()
        if b.reset_at is not None and b.remaining is not None and b.remaining <= 0
    ]
    return max(resets) if resets else None
