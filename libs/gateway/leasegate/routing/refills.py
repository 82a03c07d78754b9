"""How fast a header-learned bucket refills, remembered from the answers that could tell.

A provider's rate-limit headers give a bucket's limit, what remains and when it is full again;
the refill is then `(limit - remaining) / (reset - observed)` (`lease_ceiling.refill_rate`),
and the adaptive lease ceiling is that refill over what a lease spends. The headers' own
resolution makes this wrong when the bucket is nearly full: `remaining` is a whole number and
Anthropic's reset an RFC 3339 instant in whole seconds, rounded up, so a bucket 933 tokens
short of 20,000 with its reset "in 1 s" (really 0.47 s) reads as refilling at 933 a second,
not 2,000, and one request short of 50 as one request a second, not five. Mints read the
quota at any moment; an account with room (its bucket nearly full) was then given a ceiling
of one lease, and a pool under quota sent its leases elsewhere, past those accounts' shares
(the fleet bench: `an-claude` at 1-2 leases and 40 % of its quota while `oa-medium` ran over).

`RefillMemory` keeps, per (account, model, dimension), the fastest refill the *informative*
observations showed: those whose bucket was at least `INFORMATIVE_DEFICIT` of its limit short
(both roundings are then small beside the deficit and the time to full; the reset's rounds
the refill down, so the fastest is the nearest). A quota read with a remembered refill gets
its bucket's `window_s` (limit / refill: the period the limit refills over), which
`lease_ceiling.refill_rate` prefers; what remains now is still the provider's word. The
memory is forgotten when the limit changes (a new tier) or after `FORGET_S` without an
informative observation. Pure: `now` is passed in, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.routing.lease_ceiling import refill_rate
from leasegate.routing.selection import Pair

INFORMATIVE_DEFICIT = 0.25
"""The least share of its limit a bucket must be short of for its headers to tell its refill."""
FORGET_S = 600.0
"""How long a refill is remembered without a new informative observation."""


@dataclass(frozen=True, slots=True)
class _Seen:
    limit: int
    per_s: float
    at: float


def observed_refill(bucket: Bucket, observed_at: float) -> float | None:
    """The refill an observation tells, per second, when it can: a header-learned bucket (no
    declared window) at least `INFORMATIVE_DEFICIT` short of its limit; else None."""
    if bucket.window_s or bucket.limit is None or bucket.remaining is None:
        return None
    if bucket.limit - bucket.remaining < INFORMATIVE_DEFICIT * bucket.limit:
        return None
    return refill_rate(bucket, observed_at)


class RefillMemory:
    def __init__(self, forget_s: float = FORGET_S) -> None:
        self._forget_s = forget_s
        self._seen: dict[tuple[str, str, QuotaDimension], _Seen] = {}

    def informed(self, quotas: Mapping[Pair, Quota], now: float) -> dict[Pair, Quota]:
        """These quotas, each header-learned bucket with a remembered refill given it as its
        `window_s`; what they tell is remembered first."""
        return {pair: self._inform(quota, now) for pair, quota in quotas.items()}

    def _inform(self, quota: Quota, now: float) -> Quota:
        if quota.source != "headers":
            return quota
        buckets = {
            dimension: self._windowed(quota, dimension, bucket, now)
            for dimension, bucket in quota.buckets.items()
        }
        return replace(quota, buckets=buckets)

    def _windowed(
        self, quota: Quota, dimension: QuotaDimension, bucket: Bucket, now: float
    ) -> Bucket:
        """`bucket` with the window its remembered refill makes (unchanged when none is, or
        its window is declared), after remembering what it tells."""
        if bucket.window_s or bucket.limit is None:
            return bucket
        key = (quota.account_id, quota.model, dimension)
        seen = self._seen.get(key)
        if seen is not None and (seen.limit != bucket.limit or now - seen.at > self._forget_s):
            del self._seen[key]
            seen = None
        per_s = observed_refill(bucket, quota.observed_at)
        if per_s is not None and per_s > 0:
            seen = _Seen(bucket.limit, per_s if seen is None else max(per_s, seen.per_s), now)
            self._seen[key] = seen
        return bucket if seen is None else replace(bucket, window_s=bucket.limit / seen.per_s)
