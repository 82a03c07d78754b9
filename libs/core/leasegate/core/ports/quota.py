"""What an (account, served model) may still send, as the provider says or the operator declared.

A `Quota` is a set of `Bucket`s, one per dimension the provider limits (requests, tokens, or
input and output tokens separately). Each bucket holds what was known at `observed_at`: its
limit, what remained, and when it is full again (`reset_at`). Buckets refill continuously, so
what remains *now* is not what remained then; `Bucket.remaining_at` models it:

    now >= reset_at                  the bucket is full again: `limit` (None when unknown)
    limit and reset_at known         linear refill from `remaining` at `observed_at` to `limit`
                                     at `reset_at` (OpenAI's and Anthropic's reset is "fully
                                     replenished", so this is the provider's own rate)
    limit and window_s known         `remaining + limit x elapsed / window_s`, capped at limit
                                     (declared per-minute limits)
    neither                          `remaining` until `observed_at + UNTIMED_TRUST_S`, then
                                     unknown (Azure sends remaining without a reset)

Unknown means "admit": the gateway refuses only on what it knows. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

QuotaDimension = Literal["requests", "tokens", "input-tokens", "output-tokens"]
QuotaSource = Literal["headers", "declared"]

DIMENSIONS: tuple[QuotaDimension, ...] = ("requests", "tokens", "input-tokens", "output-tokens")

UNTIMED_TRUST_S = 1.0
"""How long a bucket that says neither its limit's window nor its reset is taken at its word."""


@dataclass(frozen=True, slots=True)
class Bucket:
    limit: int | None
    """The most the bucket holds (requests or tokens); None when not said."""
    remaining: float | None
    """What remained at the owning Quota's `observed_at`; None when not said. A whole number
    as a provider says it; in a proxy's local view a real one (the refill since the last
    answer, kept to the fraction: rounded down at every request, a declared 2-a-second
    bucket spent twice a second lost half its refill), and below zero a debt (requests let
    through beyond it), paid back by the refill."""
    reset_at: float | None
    """Epoch seconds when the bucket is full again (the provider's reset); None when unknown."""
    window_s: float | None = None
    """The period `limit` refills over, when known (60 for a declared per-minute limit)."""

    def remaining_at(self, now: float, observed_at: float) -> float | None:
        """What the bucket holds at `now` (see the module docstring; below zero: a debt);
        None: unknown."""
        limit, remaining, reset_at = self.limit, self.remaining, self.reset_at
        if reset_at is not None and now >= reset_at:
            return None if limit is None else float(limit)
        if remaining is None:
            return None if limit is None else float(limit)
        elapsed = max(0.0, now - observed_at)
        if limit is not None and reset_at is not None:
            span = reset_at - observed_at
            if span <= 0 or remaining >= limit:
                return float(remaining)
            return remaining + (limit - remaining) * min(1.0, elapsed / span)
        if limit is not None and self.window_s:
            return min(float(limit), remaining + limit * elapsed / self.window_s)
        if reset_at is None and elapsed > UNTIMED_TRUST_S:
            return None
        return float(remaining)

    def room_at(self, need: int, now: float, observed_at: float) -> float | None:
        """None when `need` fits now (or nothing is known); else epoch seconds when it will."""
        want = float(max(need, 1))
        if self.limit is not None and want > self.limit:
            want = float(self.limit)  # more than the bucket ever holds: wait for it full
        have = self.remaining_at(now, observed_at)
        if have is None or have >= want:
            return None
        remaining = self.remaining if self.remaining is not None else 0
        if self.limit is not None and self.reset_at is not None:
            span = self.reset_at - observed_at
            if span > 0 and self.limit > remaining:
                rate = (self.limit - remaining) / span
                return max(now, observed_at + (want - remaining) / rate)
            return max(now, self.reset_at)
        if self.limit and self.window_s:
            return max(now, observed_at + (want - remaining) * self.window_s / self.limit)
        if self.reset_at is not None:
            return max(now, self.reset_at)
        return observed_at + UNTIMED_TRUST_S  # untimed: trusted only that long


@dataclass(frozen=True, slots=True)
class Quota:
    """What one (account, served model) may send, as last learned."""

    account_id: str
    model: str
    """The served model (after alias resolution)."""
    buckets: Mapping[QuotaDimension, Bucket]
    source: QuotaSource
    """`headers`: the provider's answers said so; `declared`: the accounts file does."""
    observed_at: float
    """Epoch seconds the buckets' `remaining` was true."""

    def room_at(
        self,
        requests: int,
        tokens: int,
        now: float,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> float | None:
        """None: `requests` requests of `tokens` tokens in all (`input_tokens` and
        `output_tokens` of them, for providers that limit those apart) fit now, or nothing
        known says otherwise; else epoch seconds when they are expected to fit."""
        needs: dict[QuotaDimension, int] = {
            "requests": requests,
            "tokens": tokens,
            "input-tokens": input_tokens,
            "output-tokens": output_tokens,
        }
        latest: float | None = None
        for dimension, bucket in self.buckets.items():
            need = needs[dimension]
            if need <= 0:
                continue
            when = bucket.room_at(need, now, self.observed_at)
            if when is not None and (latest is None or when > latest):
                latest = when
        return latest

    def remaining_at(self, dimension: QuotaDimension, now: float) -> float | None:
        bucket = self.buckets.get(dimension)
        return None if bucket is None else bucket.remaining_at(now, self.observed_at)

    def expires_at(self) -> float:
        """When nothing in it says more than "full": the latest reset, else `observed_at`."""
        resets = [b.reset_at for b in self.buckets.values() if b.reset_at is not None]
        return max([self.observed_at, *resets])


class QuotaStore(Protocol):
    """The quotas every proxy has learned, shared (the health store's Redis, or in process).

    Written behind the requests (batched), read by mints and views, and by each proxy's local
    view periodically: never on a request's success path."""

    async def snapshot(
        self, pairs: Sequence[tuple[str, str]], now: float
    ) -> Mapping[tuple[str, str], Quota]:
        """The latest quota known for each (account_id, served model) that has one. One round
        trip in the Redis implementation (one per node on a cluster)."""

    async def learn(self, quotas: Sequence[Quota], now: float) -> None:
        """Store these, each replacing an older one of its pair (a newer one stays)."""

    async def aclose(self) -> None:
        """Release what the store owns."""


OnQuotaNews = Callable[[Sequence[Quota]], None]


class QuotaNewsBus(Protocol):
    """Quota news between proxies: a proxy that finds a pair exhausted (a rate-limit 429, or
    an answer whose headers leave no room for a request like it) tells every proxy at once,
    with the statement itself. Carried on the health news channel (fire and forget); what
    is missed is read from the `QuotaStore` at the next refresh anyway."""

    async def publish_quota(self, quotas: Sequence[Quota]) -> None: ...

    def on_quota(self, deliver: OnQuotaNews) -> None:
        """Deliver the quota news heard from now on to `deliver`, on the subscription the
        health view starts (`HealthFanout.subscribe`)."""
