"""The lease-rate meter: what one live lease of each (account, served model) spends per second,
measured from evidence and smoothed, for the adaptive lease ceilings (`routing.lease_ceiling`).

Every `every_s` (`LEASEGATE_LEASE_RATE_INTERVAL_S`, 10 s) each control plane counts, in the
background, each pair's live leases. An interval between two counts is measured once it ended
`settle_s` ago (the longest a finished request's row waits in the proxy's memory, plus a
margin; the counts of the intervals not measured yet are kept): the requests and tokens sent to
each pair by the requests that *ended* in it, so every request is counted once, when its row
is surely written. (Counted by when they started, as before 2026-12-04, the requests still
running or waiting in the proxy's memory when an interval was read were never counted: with
0.5 s turns and a 2 s interval the spend per lease read about 30 % low, the ceilings as much
too high, and the pool's first accounts ran at their quota's edge.)

The interval's lease-seconds are the mean of the live leases at its two ends times its length;
requests and tokens over lease-seconds are one sample, folded into a moving average
(`routing.lease_ceiling.smoothed`). A pair with no lease live at either end keeps its average.
A pair's average starts from the prior (`prior`: the default per-lease spend), worth one lease
measured over one interval, and leaves it as fast as the pair's own lease-seconds outweigh it
(`routing.lease_ceiling.sample_weight`: the running mean's share, never less than `alpha`):
a first sample is not taken alone (leases minted late in an interval send little in it, and a
first sample far below the spend would set the ceiling far too high), nor folded in at
`alpha` alone (a pair whose leases spend a fifth of the prior's took some eight intervals to
be let the leases its quota sustains). Mints read `current()`: no I/O on the mint's
path. Replicas measure the same rows, so they agree closely without coordinating. A failed
read is logged and skipped (its interval is not measured).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.storage import LeaseSpendReader
from leasegate.core.tasks import stop_task
from leasegate.routing.lease_ceiling import (
    DEFAULT_ALPHA,
    LeaseRate,
    sample_weight,
    sampled,
    smoothed,
)

log = logging.getLogger("leasegate.capacity")

Pair = tuple[str, str]


class LeaseRateMeter:
    def __init__(
        self,
        store: LeaseSpendReader,
        account_ids: Sequence[str],
        clock: Clock,
        *,
        every_s: float,
        settle_s: float = 0.0,
        alpha: float = DEFAULT_ALPHA,
        prior: LeaseRate | None = None,
    ) -> None:
        self._prior = prior
        self._store = store
        self._accounts = tuple(account_ids)
        self._clock = clock
        self._every_s = every_s
        self._settle = timedelta(seconds=settle_s)
        self._alpha = alpha
        self._rates: dict[Pair, LeaseRate] = {}
        self._seen: dict[Pair, float] = {}
        """The lease-seconds measured of each pair so far."""
        self._counts: deque[tuple[datetime, Mapping[Pair, int]]] = deque()
        """The live leases at each call not yet past a measured interval, oldest first."""
        self._task: asyncio.Task[None] | None = None

    def current(self) -> Mapping[Pair, LeaseRate]:
        return self._rates

    async def run_once(self) -> None:
        """Count the live leases now; measure every interval between two earlier counts that
        ended at least `settle_s` ago and was not measured yet (the first calls only count)."""
        now = self._clock.now()
        self._counts.append((now, await self._store.live_leases_by_pair(self._accounts, now)))
        while len(self._counts) > 1 and self._counts[1][0] <= now - self._settle:
            (since, before), (until, after) = self._counts[0], self._counts[1]
            self._counts.popleft()
            await self._measure(since, before, until, after)

    async def _measure(
        self,
        since: datetime,
        before: Mapping[Pair, int],
        until: datetime,
        after: Mapping[Pair, int],
    ) -> None:
        seconds = (until - since).total_seconds()
        if seconds <= 0 or not any(before.values()):
            return  # no lease live at its start: nothing to measure (`_leases_sending`)
        spent = {
            (s.account_id, s.served_model): s for s in await self._store.spend_by_pair(since, until)
        }
        rates = dict(self._rates)
        for pair in {*before, *after}:
            lease_seconds = seconds * _leases_sending(before.get(pair, 0), after.get(pair, 0))
            spend = spent.get(pair)
            sample = sampled(
                spend.requests if spend else 0,
                spend.input_tokens if spend else 0,
                spend.output_tokens if spend else 0,
                lease_seconds,
                spend.waited_s if spend else 0.0,
            )
            if sample is not None:
                seen = self._seen.get(pair, 0.0)
                weight = sample_weight(lease_seconds, seen, self._every_s, self._alpha)
                rates[pair] = smoothed(rates.get(pair, self._prior), sample, weight)
                self._seen[pair] = seen + lease_seconds
        self._rates = rates

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except StoreError as exc:
                log.warning("lease rates not measured", extra={"error": type(exc).__name__})
            await asyncio.sleep(self._every_s)


def _leases_sending(before: int, after: int) -> float:
    """The leases an interval's spend is spread over: the mean of its two counts, but no more
    than the count at its start while the pair gains leases (a lease minted within the
    interval rarely has a request *ended* in it, its first answer coming in the next: counted,
    it would read the pair's spend low while its fleet grows, and set its ceiling high). So an
    interval a pair starts with no lease measures nothing: its first leases are measured from
    the next one on, while the pool's prior bounds it."""
    return min(before, (before + after) / 2)
