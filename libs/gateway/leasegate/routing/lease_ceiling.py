"""Adaptive lease ceilings: how many live leases an (account, served model)'s learned quota
sustains, from what one live lease actually spends per second. Pure: no I/O, no clock.

A bucket refills at `refill_rate` per second (its limit over its window, or the provider's own
linear refill to its reset). A live lease spends, on average, `LeaseRate` per second (requests
and input/output tokens, measured from evidence and smoothed: `smoothed`). So

    sustained leases = ceil(min over the quota's dimensions of refill_rate / per-lease spend)

(the fewest leases whose spend meets the refill; the walk's spreading share of it rounds
down instead, `sustained_leases`) and never below 1 (an account with a quota always admits
one lease: the proxy still refuses what the bucket cannot take). A new lease fits an
(account, model) when the bucket has room for one more request now and the live leases are
below what it sustains (`quota_room`); the operator's `lease_capacity`, when set, is an
upper bound (`effective_ceiling`).

Until a pair's own spend is measured its ceiling uses a **prior** (`prior_rate`): the mean of
what the leases of the pool's other pairs were measured to spend (the spend is the fleet's,
not the account's), else a default (`default_prior`: a request of `PRIOR_INPUT_TOKENS` +
`PRIOR_OUTPUT_TOKENS` every `1 / requests_per_s` seconds). So a pair whose quota is known binds
from its first lease, and the first seconds of a fleet do not all land on the pool's first
account.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension

PRIOR_INPUT_TOKENS = 1000
"""The default prior's input tokens per request."""
PRIOR_OUTPUT_TOKENS = 256
"""The default prior's output tokens per request (the proxy's default output estimate)."""
LEASE_TURNOVER_S = 1.0
"""When room is expected on an account at its sustained ceiling: as soon as any lease ends."""
DEFAULT_ALPHA = 0.3
"""The weight of each new sample in the moving average."""
SENDING_SHARE_MIN = 0.1
"""The least share of an interval's lease-seconds left to sending that `sampled` measures."""
_ROUNDING = 1e-9
"""A quota sustaining exactly n leases' spend (up to float error) sustains n, not n +/- 1."""


@dataclass(frozen=True, slots=True)
class LeaseRate:
    """What one live lease spends per second, on average."""

    requests_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.input_tokens_per_s + self.output_tokens_per_s

    def spend(self, dimension: QuotaDimension) -> float:
        if dimension == "requests":
            return self.requests_per_s
        if dimension == "input-tokens":
            return self.input_tokens_per_s
        if dimension == "output-tokens":
            return self.output_tokens_per_s
        return self.tokens_per_s

    def per_request(self) -> tuple[int, int, int]:
        """(tokens, input tokens, output tokens) one request spends on average, each at
        least 1."""
        if self.requests_per_s <= 0:
            return 1, 1, 1
        each = (self.tokens_per_s, self.input_tokens_per_s, self.output_tokens_per_s)
        tokens, inputs, outputs = (max(1, math.ceil(t / self.requests_per_s)) for t in each)
        return tokens, inputs, outputs


def default_prior(requests_per_s: float) -> LeaseRate:
    """What a lease is assumed to spend before anything was measured: `requests_per_s`
    requests of `PRIOR_INPUT_TOKENS` in and `PRIOR_OUTPUT_TOKENS` out."""
    return LeaseRate(
        requests_per_s,
        requests_per_s * PRIOR_INPUT_TOKENS,
        requests_per_s * PRIOR_OUTPUT_TOKENS,
    )


def prior_rate(measured: Iterable[LeaseRate], default: LeaseRate | None) -> LeaseRate | None:
    """The rate a pair without a measurement of its own is bounded at: the mean of the pool's
    measured pairs (`measured`), else `default` (None: no prior, nothing bounds it)."""
    rates = list(measured)
    if not rates:
        return default
    n = len(rates)
    return LeaseRate(
        sum(r.requests_per_s for r in rates) / n,
        sum(r.input_tokens_per_s for r in rates) / n,
        sum(r.output_tokens_per_s for r in rates) / n,
    )


def sampled(
    requests: int,
    input_tokens: int,
    output_tokens: int,
    lease_seconds: float,
    waited_s: float = 0.0,
) -> LeaseRate | None:
    """One measurement: what a live lease sends per second it is free to send, over
    `lease_seconds` of live leases (leases x seconds) of which `waited_s` were spent waiting
    out the `Retry-After` of the proxy's quota refusals; None when no lease was live, or when
    the leases did little but wait (less than `SENDING_SHARE_MIN` of the lease-seconds left,
    or nothing sent: too little of what one sends was seen to measure it; the lease counts
    are sampled at the interval's ends, the waits summed over it, so a small remainder is
    mostly their disagreement).

    What was sent over the lease-seconds alone would be no measure on a throttled account:
    leases held back by the quota send only what the quota lets through, so spend / lease
    falls as leases are added and the ceiling (refill / spend per lease) would grow with the
    leases, never binding. A lease held back spends the refusal's `Retry-After` waiting, so
    the time left is what it sends in at its own pace: spend over it is what a lease wants,
    however throttled."""
    sending = lease_seconds - waited_s
    if lease_seconds <= 0 or sending < SENDING_SHARE_MIN * lease_seconds:
        return None
    if requests == 0 and waited_s > 0:
        return None
    return LeaseRate(requests / sending, input_tokens / sending, output_tokens / sending)


def sample_weight(
    lease_seconds: float, seen_lease_seconds: float, prior_lease_seconds: float, alpha: float
) -> float:
    """The share a sample of `lease_seconds` takes in a pair's average when `seen_lease_seconds`
    were measured of it before and the prior it started from is worth `prior_lease_seconds`:
    the running mean's share (the sample's lease-seconds over everything the average now
    stands on) while little was measured, never less than `alpha`.

    So a pair's average leaves its prior as fast as its own measurements outweigh it (a first
    sample over four times the prior's lease-seconds takes 80 % of the average), a thin one
    (leases minted at an interval's end, sending nothing yet) no more than `alpha`, as
    before; once the measurements far outweigh the prior, the moving average's `alpha`
    follows a changing spend."""
    if lease_seconds <= 0:
        return 0.0
    mean_share = lease_seconds / (lease_seconds + seen_lease_seconds + prior_lease_seconds)
    return max(alpha, mean_share)


def smoothed(
    previous: LeaseRate | None, sample: LeaseRate, alpha: float = DEFAULT_ALPHA
) -> LeaseRate:
    """The exponentially weighted moving average: `alpha` of the sample, the rest of before."""
    if previous is None:
        return sample
    keep = 1.0 - alpha
    return LeaseRate(
        keep * previous.requests_per_s + alpha * sample.requests_per_s,
        keep * previous.input_tokens_per_s + alpha * sample.input_tokens_per_s,
        keep * previous.output_tokens_per_s + alpha * sample.output_tokens_per_s,
    )


def refill_rate(bucket: Bucket, observed_at: float) -> float | None:
    """Units per second the bucket refills at; None when its limit or timing is unknown."""
    if bucket.limit is None:
        return None
    if bucket.window_s:
        return bucket.limit / bucket.window_s
    if bucket.reset_at is not None and bucket.remaining is not None:
        span = bucket.reset_at - observed_at
        if span > 0 and bucket.limit > bucket.remaining:
            return (bucket.limit - bucket.remaining) / span
    return None


def sustained_leases(
    quota: Quota, rate: LeaseRate | None, share: float | None = None
) -> int | None:
    """How many live leases the quota's refill sustains at `rate` each; None when nothing
    known bounds it (no rate measured, or no dimension with both a refill and a spend).

    The whole ceiling (`share` None) is the fewest leases whose spend meets the refill: with
    one fewer the bucket would fill and its refill go to waste whenever the pool is saturated
    (an account sustaining 2.98 leases' spend held 2 and ran at 67 % of its quota in the fleet
    bench); the last lease's spend past the refill is the proxy's to hold back, each request
    with the `Retry-After` of the bucket's next room. A `share` (the walk's spreading bound,
    below the whole) is the most leases whose spend stays within that share of the refill: the
    headroom that keeps bursts under the quota while the pool has room elsewhere."""
    if rate is None:
        return None
    ceilings: list[float] = []
    for dimension, bucket in quota.buckets.items():
        refill = refill_rate(bucket, quota.observed_at)
        spend = rate.spend(dimension)
        if refill is not None and spend > 0:
            ceilings.append(refill / spend)
    if not ceilings:
        return None
    sustained = min(ceilings)
    if share is None:
        return max(1, math.ceil(sustained - _ROUNDING))
    return max(1, math.floor(share * sustained + _ROUNDING))


def effective_ceiling(
    quota: Quota | None,
    rate: LeaseRate | None,
    lease_capacity: int | None,
    probe: int | None = None,
    share: float | None = None,
) -> int | None:
    """The account's lease ceiling for this model: what the quota sustains (the whole, or
    `share` of it),
    or `probe` when no quota is known, bounded by the operator's `lease_capacity`; None when
    nothing bounds it."""
    sustained = sustained_leases(quota, rate, share) if quota is not None else probe
    if sustained is None:
        return lease_capacity
    return sustained if lease_capacity is None else min(sustained, lease_capacity)


class Room(NamedTuple):
    """When a pair's quota is expected to take one more lease."""

    at: float
    """Epoch seconds."""
    lease_bound: bool
    """Whether room comes only as some lease ends (the live leases hold the probe's or the
    sustained ceiling: `LEASE_TURNOVER_S` is a guess, no time is known) rather than when the
    bucket refills."""


def quota_room(
    quota: Quota | None,
    rate: LeaseRate | None,
    live: int,
    now: float,
    probe: int | None = None,
    share: float | None = None,
) -> Room | None:
    """None when one more lease fits the quota now; else when room is expected: when the
    bucket holds one average request again, or (at the sustained ceiling) in
    `LEASE_TURNOVER_S`. No quota known: room, up to `probe` live leases when given (nothing
    is known of the pair yet: a few leases learn its quota before more are sent there)."""
    if quota is None:
        return None if probe is None or live < probe else Room(now + LEASE_TURNOVER_S, True)
    tokens, inputs, outputs = rate.per_request() if rate is not None else (1, 1, 1)
    empty_until = quota.room_at(1, tokens, now, input_tokens=inputs, output_tokens=outputs)
    if empty_until is not None:
        return Room(empty_until, False)
    sustained = sustained_leases(quota, rate, share)
    if sustained is not None and live >= sustained:
        return Room(now + LEASE_TURNOVER_S, True)
    return None


def quota_wait(quota: Quota | None, rate: LeaseRate | None, live: int, now: float) -> float | None:
    """When one more lease fits the quota if waiting for the bucket is allowed: None at once,
    or when the bucket holds one average request again; never while the live leases are at
    the sustained ceiling (infinity: room comes only as a lease ends, which no wait names)."""
    if quota is None:
        return None
    sustained = sustained_leases(quota, rate)
    if sustained is not None and live >= sustained:
        return math.inf
    tokens, inputs, outputs = rate.per_request() if rate is not None else (1, 1, 1)
    return quota.room_at(1, tokens, now, input_tokens=inputs, output_tokens=outputs)
