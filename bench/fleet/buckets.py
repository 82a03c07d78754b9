"""The mock upstream's arithmetic, pure: token buckets refilled continuously, and the
rate-limit headers providers answer with (OpenAI's `x-ratelimit-*` with Go-style durations,
Anthropic's `anthropic-ratelimit-*` with RFC 3339 instants).

A bucket holds up to `capacity` units and refills at `capacity / window_s` units per second,
continuously (not in steps). A request is admitted only when every bucket it draws on holds
its whole cost; then each is charged at once (as OpenAI charges `max_tokens` up front). A
refused request is charged nothing and told how long until every bucket it lacks could take
it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(slots=True)
class Bucket:
    capacity: float
    window_s: float
    """`capacity` per this many seconds: the refill rate is capacity / window_s."""
    level: float = 0.0
    """Units available at `at` (empty at start)."""
    at: float = 0.0

    @property
    def per_second(self) -> float:
        return self.capacity / self.window_s

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.per_second)
            self.at = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` fits (0 if it fits now; inf if it never can)."""
        self.refill(now)
        if amount > self.capacity:
            return math.inf
        return max(0.0, (amount - self.level) / self.per_second)

    def full_in(self, now: float) -> float:
        """Seconds until the bucket is full again (the providers' "reset")."""
        self.refill(now)
        return (self.capacity - self.level) / self.per_second

    def remaining(self, now: float) -> int:
        self.refill(now)
        return math.floor(self.level)


def admit(buckets: Mapping[str, Bucket], costs: Mapping[str, float], now: float) -> float:
    """Charge every bucket its cost and answer 0.0, or charge nothing and answer the seconds
    until all of them could take it (inf when a cost exceeds a bucket's capacity)."""
    wait = max((buckets[name].wait_for(cost, now) for name, cost in costs.items()), default=0.0)
    if wait > 0:
        return wait
    for name, cost in costs.items():
        buckets[name].level -= cost
    return 0.0


def go_duration(seconds: float) -> str:
    """A duration as Go's `time.Duration.String()` prints it, to the millisecond: `0s`,
    `350ms`, `1.2s`, `6m0s`, `1h2m3.5s` (the form of OpenAI's `x-ratelimit-reset-*`)."""
    millis = max(0, math.ceil(seconds * 1000 - 1e-6))
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, frac = divmod(rest, 1000)
    secs = f"{whole}.{frac:03d}".rstrip("0").rstrip(".") if frac else str(whole)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def rfc3339(epoch_s: float) -> str:
    """An instant as Anthropic's reset headers carry it: UTC, whole seconds, rounded up (a
    reader never learns of a refill earlier than it happens)."""
    instant = datetime.fromtimestamp(math.ceil(epoch_s - 1e-6), UTC)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def openai_headers(buckets: Mapping[str, Bucket], now: float) -> dict[str, str]:
    """`x-ratelimit-{limit,remaining,reset}-{requests,tokens}` for the buckets named
    `requests` and `tokens`."""
    headers: dict[str, str] = {}
    for name in ("requests", "tokens"):
        bucket = buckets[name]
        headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.capacity))
        headers[f"x-ratelimit-remaining-{name}"] = str(bucket.remaining(now))
        headers[f"x-ratelimit-reset-{name}"] = go_duration(bucket.full_in(now))
    return headers


def anthropic_headers(buckets: Mapping[str, Bucket], now: float, wall: float) -> dict[str, str]:
    """`anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining,
    reset}` for the buckets named `requests`, `input-tokens` and `output-tokens`; `tokens`
    repeats whichever of the two token buckets has less left (the most restrictive).
    `wall`: the epoch seconds at `now`, for the RFC 3339 resets."""
    headers: dict[str, str] = {}
    names = ("requests", "input-tokens", "output-tokens")
    for name in names:
        bucket = buckets[name]
        headers[f"anthropic-ratelimit-{name}-limit"] = str(int(bucket.capacity))
        headers[f"anthropic-ratelimit-{name}-remaining"] = str(bucket.remaining(now))
        headers[f"anthropic-ratelimit-{name}-reset"] = rfc3339(wall + bucket.full_in(now))
    tightest = min(("input-tokens", "output-tokens"), key=lambda n: buckets[n].remaining(now))
    for part in ("limit", "remaining", "reset"):
        headers[f"anthropic-ratelimit-tokens-{part}"] = headers[
            f"anthropic-ratelimit-{tightest}-{part}"
        ]
    return headers


def retry_after(wait_s: float) -> str:
    """`retry-after` in whole seconds, rounded up (the header takes no fraction)."""
    return str(max(1, math.ceil(wait_s - 1e-6)))
