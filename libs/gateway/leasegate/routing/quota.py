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
in flight       the headers of the answer to the most recently sent request are the newest;
                they count every request the provider took before it, not those sent after
                it and still unanswered: what those were let through at is spent again from
                the headers (`learned_behind`), so an answer never gives back room that
                other requests in flight hold
reconciled      an answer without headers: the view's remaining moves by
                estimate - actual, so a generous estimate is given back
rate_limit_hold a rate-limit 429: no request fits until its wait is over (plus a small
                jitter so the proxies that heard it do not all come back at once)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from leasegate.accounts import DeclaredLimits
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.providers.estimate import tokens_for
from leasegate.routing.lease_ceiling import refill_rate

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
        input_tokens=tokens_for(body_bytes),  # the body's bytes / 4: as a stream's estimate
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
        remaining = held - by.get(dimension, 0)
        if bucket.limit is not None:
            remaining = min(remaining, bucket.limit)
        reset_at = rebased_reset(bucket, quota.observed_at, remaining, now)
        buckets[dimension] = Bucket(bucket.limit, remaining, reset_at, bucket.window_s)
    return Quota(quota.account_id, quota.model, buckets, quota.source, now)


def rebased_reset(bucket: Bucket, observed_at: float, remaining: float, now: float) -> float | None:
    """The reset of a bucket observed at `observed_at` that holds `remaining` at `now` after a
    move, at the refill rate it was observed with: a provider's reset is when the bucket is
    full again, so spending from it puts the reset later. (Kept as it was, the linear refill
    to it would speed up with every request spent: a bucket 10 requests in debt 2 s before
    its reset would refill 25 a second instead of 4, admitting what the provider refuses and
    inflating the lease ceiling the refill sets.) Unchanged for a bucket of a fixed window,
    and where the rate is unknown (no limit or reset, or observed full)."""
    if bucket.window_s or bucket.limit is None:
        return bucket.reset_at
    rate = refill_rate(bucket, observed_at)
    if rate is None or rate <= 0:
        return bucket.reset_at
    return now + max(0, bucket.limit - remaining) / rate


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
    held ones; the rest are kept, rebased to now. An answer stating none (a 429 without
    headers) leaves the view's `source` as it was: a declared quota stays `declared`."""
    if held is None or held.buckets.keys() <= buckets.keys():
        return Quota(account_id, model, buckets, "headers", now)  # nothing of it is kept
    kept = dict(_moved(held, {}, now).buckets)
    kept.update(buckets)
    return Quota(account_id, model, kept, "headers" if buckets else held.source, now)


def total(costs: Iterable[Estimate]) -> Estimate:
    """The sum of several estimates (what requests still in flight hold)."""
    input_tokens = output_tokens = requests = 0
    for cost in costs:
        input_tokens += cost.input_tokens
        output_tokens += cost.output_tokens
        requests += cost.requests
    return Estimate(input_tokens, output_tokens, requests)


def learned_behind(
    held: Quota | None,
    account_id: str,
    model: str,
    buckets: Mapping[QuotaDimension, Bucket],
    behind: Estimate,
    now: float,
) -> Quota:
    """`learned`, less what the requests sent after the answered one and still unanswered
    were let through at (`behind`): the headers do not count them yet."""
    quota = learned(held, account_id, model, buckets, now)
    if not behind.requests:
        return quota
    return _moved(quota, _needs(behind), now)


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
    """The view after a rate-limit 429: what its headers said, and no request until `until`.

    When the requests bucket's limit and refill are known (the 429's headers, or what the
    view held), the hold keeps them: a debt that the bucket's own refill pays back to one
    request exactly at `until` (`requests_hold`), so the pair's adaptive lease ceiling still
    knows the account's request rate. Otherwise a bucket of no limit, empty until `until`."""
    quota = learned(held, account_id, model, buckets, now)
    hold = dict(quota.buckets)
    hold["requests"] = requests_hold(quota.buckets.get("requests"), quota.observed_at, until, now)
    return Quota(account_id, model, hold, quota.source, now)


def requests_hold(bucket: Bucket | None, observed_at: float, until: float, now: float) -> Bucket:
    """A requests bucket that holds no request before `until` and one at `until`, refilling
    exactly as fast as `bucket` does (its limit and window kept) when that is known.

    Exactly, not to the whole request: a headerless account's view is never corrected by a
    later answer, so a refill rounded here stays (a whole-number debt let a declared 2-a-second
    bucket held for 1.05 s refill at 2.86 a second ever after, and the proxy sent the provider
    43 % more than it allows: 45 to 56 upstream 429s in a 180 s saturated fleet run)."""
    wait = until - now
    rate = None if bucket is None else refill_rate(bucket, observed_at)
    if bucket is None or bucket.limit is None or rate is None or rate <= 0 or wait <= 0:
        return Bucket(None, 0, until)
    remaining = 1.0 - rate * wait  # below zero a debt: one request's worth refilled at `until`
    if bucket.window_s:  # a declared bucket refills `limit` per window, whatever is spent
        return Bucket(bucket.limit, remaining, None, bucket.window_s)
    return Bucket(bucket.limit, remaining, now + (bucket.limit - remaining) / rate)


def declared_quota(account_id: str, model: str, limits: DeclaredLimits, now: float) -> Quota | None:
    """A declared per-minute quota, full at `now`; None when the model declares no limit. Each
    bucket refills at its limit per minute and holds `burst_s` seconds of it (a minute's,
    the whole limit, unless the model declares a shorter burst)."""
    declared: tuple[tuple[QuotaDimension, int | None], ...] = (
        ("requests", limits.rpm),
        ("tokens", limits.tpm),
        ("input-tokens", limits.input_tpm),
        ("output-tokens", limits.output_tpm),
    )
    window = float(limits.burst_s or DECLARED_WINDOW_S)
    buckets: dict[QuotaDimension, Bucket] = {}
    for dimension, per_minute in declared:
        if per_minute is not None:
            held = max(1, round(per_minute * window / DECLARED_WINDOW_S))
            buckets[dimension] = Bucket(held, held, None, window)
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


def room_now(bucket: Bucket, observed_at: float, now: float) -> int | None:
    """What a bucket holds now, rounded down and never below zero (what a caller is told:
    never more than the provider said); None: unknown."""
    held = bucket.remaining_at(now, observed_at)
    return None if held is None else max(0, math.floor(held))


def full_in_s(bucket: Bucket, observed_at: float, now: float) -> int | None:
    """Whole seconds (rounded up) until the bucket is full again; None: unknown."""
    if bucket.reset_at is not None:
        return max(0, math.ceil(bucket.reset_at - now))
    held = bucket.remaining_at(now, observed_at)
    if held is None or bucket.limit is None or not bucket.window_s:
        return None
    return max(0, math.ceil((bucket.limit - held) * bucket.window_s / bucket.limit))


def ratelimit_fields(quota: Quota, now: float) -> tuple[str, str] | None:
    """`RateLimit-Policy` and `RateLimit` (the IETF httpapi draft's structured fields) for a
    pair's quota: one policy per limited dimension, named after it, `q` its limit, `qu` its
    unit, `w` its window when known; `r` what remains now (rounded down), `t` the seconds
    until it is full (rounded up), so the caller is never told more than the provider said.
    None when nothing is known."""
    policies: list[str] = []
    states: list[str] = []
    for dimension, bucket in quota.buckets.items():
        unit = "requests" if dimension == "requests" else "tokens"
        if bucket.limit is not None:
            window = f";w={math.ceil(bucket.window_s)}" if bucket.window_s else ""
            policies.append(f'"{dimension}";q={bucket.limit};qu="{unit}"{window}')
        remaining = None if bucket.remaining is None else room_now(bucket, quota.observed_at, now)
        if remaining is None:
            continue  # never said, or no longer known: nothing is claimed
        reset = full_in_s(bucket, quota.observed_at, now)
        states.append(f'"{dimension}";r={remaining}' + ("" if reset is None else f";t={reset}"))
    if not states:
        return None
    return ", ".join(policies), ", ".join(states)
