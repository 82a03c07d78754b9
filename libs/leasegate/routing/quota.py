"""The quota arithmetic a proxy runs on its local view (pure: no I/O, `now` passed in).

estimate        what a request will cost: 1 request, input tokens from the body's size,
                output tokens from its `max_tokens` (or `max_completion_tokens`,
                `max_output_tokens`, Gemini's `generationConfig.maxOutputTokens`), else
                the model's default
admit           `Quota.room_at` for that estimate; when it fits, the view is spent by it
                at once (so concurrent requests on one proxy see each other)
learned         an answer's rate-limit headers replace, dimension by dimension, what the
                view held (they already count this request); declared dimensions the
                headers do not mention stay
reconciled      an answer without headers: the view's remaining moves by
                estimate - actual, so a generous estimate is given back
rate_limit_hold a rate-limit 429: no request fits until its wait is over (plus a small
                jitter so the proxies that heard it do not all come back at once)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from leasegate.accounts import DeclaredLimits
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension

BYTES_PER_TOKEN = 4
"""A request body's size in bytes over this is its input estimate (English text and JSON
run 3-4 bytes a token; the larger figure errs towards admitting)."""

DEFAULT_OUTPUT_TOKENS = 256
"""The output estimate of a request that names no cap and whose model declares none."""

JITTER_MAX_S = 0.25
"""A rate-limit hold is lengthened by at most this, and at most 10 % of the wait."""

DECLARED_WINDOW_S = 60.0
"""Declared limits are per minute."""

_OUTPUT_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class Estimate:
    input_tokens: int
    output_tokens: int
    requests: int = 1

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def output_cap(fields: Mapping[str, object]) -> int | None:
    """The most output tokens a request body allows, if it says."""
    for name in _OUTPUT_CAPS:
        if (value := _count(fields.get(name))) is not None:
            return value
    config = fields.get("generationConfig")
    if isinstance(config, Mapping):
        return _count(config.get("maxOutputTokens"))
    return None


def estimate(body_bytes: int, cap: int | None, default_output: int | None) -> Estimate:
    output = cap if cap is not None else default_output
    return Estimate(
        input_tokens=math.ceil(max(0, body_bytes) / BYTES_PER_TOKEN),
        output_tokens=DEFAULT_OUTPUT_TOKENS if output is None else output,
    )


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def room_at(quota: Quota, cost: Estimate, now: float) -> float | None:
    """None: the estimate fits now (or nothing known says otherwise); else when it will."""
    return quota.room_at(
        cost.requests,
        cost.tokens,
        now,
        input_tokens=cost.input_tokens,
        output_tokens=cost.output_tokens,
    )


def _needs(cost: Estimate) -> dict[QuotaDimension, int]:
    return {
        "requests": cost.requests,
        "tokens": cost.tokens,
        "input-tokens": cost.input_tokens,
        "output-tokens": cost.output_tokens,
    }


def _moved(quota: Quota, by: Mapping[QuotaDimension, int], now: float) -> Quota:
    """The quota rebased to `now`, each known bucket's remaining lowered by `by` (a debt may
    go below zero: the refill pays it back before anything fits again)."""
    buckets: dict[QuotaDimension, Bucket] = {}
    for dimension, bucket in quota.buckets.items():
        held = bucket.remaining_at(now, quota.observed_at)
        if bucket.remaining is None or held is None:
            buckets[dimension] = Bucket(bucket.limit, None, bucket.reset_at, bucket.window_s)
            continue
        remaining = math.floor(held) - by.get(dimension, 0)
        if bucket.limit is not None:
            remaining = min(remaining, bucket.limit)
        buckets[dimension] = Bucket(bucket.limit, remaining, bucket.reset_at, bucket.window_s)
    return Quota(quota.account_id, quota.model, buckets, quota.source, now)


def spent(quota: Quota, cost: Estimate, now: float) -> Quota:
    """The view once a request of this estimate has been let through."""
    return _moved(quota, _needs(cost), now)


def reconciled(
    quota: Quota, cost: Estimate, input_tokens: int | None, output_tokens: int | None, now: float
) -> Quota:
    """The view once an answer without rate-limit headers reported its usage: each token
    bucket moves by actual - estimate (unknown counts keep the estimate)."""
    actual_in = cost.input_tokens if input_tokens is None else input_tokens
    actual_out = cost.output_tokens if output_tokens is None else output_tokens
    delta: dict[QuotaDimension, int] = {
        "tokens": actual_in + actual_out - cost.tokens,
        "input-tokens": actual_in - cost.input_tokens,
        "output-tokens": actual_out - cost.output_tokens,
    }
    if not any(delta.values()):
        return quota
    return _moved(quota, delta, now)


def learned(
    held: Quota | None,
    account_id: str,
    model: str,
    buckets: Mapping[QuotaDimension, Bucket],
    now: float,
) -> Quota:
    """An answer's rate-limit headers over what the view held: its dimensions replace the
    held ones; the rest are kept, rebased to now."""
    kept: dict[QuotaDimension, Bucket] = {}
    if held is not None:
        kept = dict(_moved(held, {}, now).buckets)
    kept.update(buckets)
    return Quota(account_id, model, kept, "headers", now)


def hold_s(wait_s: float, jitter: float) -> float:
    """A rate-limit hold: the provider's wait plus a jitter (`jitter` uniform in [0, 1))."""
    wait = max(0.0, wait_s)
    return wait + jitter * min(JITTER_MAX_S, 0.1 * wait)


def rate_limit_hold(
    held: Quota | None,
    account_id: str,
    model: str,
    buckets: Mapping[QuotaDimension, Bucket],
    until: float,
    now: float,
) -> Quota:
    """The view after a rate-limit 429: what its headers said, and no request until `until`."""
    quota = learned(held, account_id, model, buckets, now)
    hold = dict(quota.buckets)
    hold["requests"] = Bucket(None, 0, until)
    return Quota(account_id, model, hold, "headers", now)


def declared_quota(account_id: str, model: str, limits: DeclaredLimits, now: float) -> Quota | None:
    """A declared per-minute quota, full at `now`; None when the model declares no limit."""
    declared: tuple[tuple[QuotaDimension, int | None], ...] = (
        ("requests", limits.rpm),
        ("tokens", limits.tpm),
        ("input-tokens", limits.input_tpm),
        ("output-tokens", limits.output_tpm),
    )
    buckets: dict[QuotaDimension, Bucket] = {}
    for dimension, limit in declared:
        if limit is not None:
            buckets[dimension] = Bucket(limit, limit, None, DECLARED_WINDOW_S)
    if not buckets:
        return None
    return Quota(account_id, model, buckets, "declared", now)


RATE_LIMIT_WAIT_S = 1.0
"""The wait of a rate-limit 429 whose answer says no time at all (no `retry-after`, no reset)."""


def returned(quota: Quota, cost: Estimate, now: float) -> Quota:
    """The view once a request it let through never reached the upstream (refused later by
    the gateway, or the send failed before any answer): its estimate is given back."""
    give: dict[QuotaDimension, int] = {d: -n for d, n in _needs(cost).items()}
    return _moved(quota, give, now)
