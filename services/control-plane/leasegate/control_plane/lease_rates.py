"""The lease-rate meter: what one live lease of each (account, served model) spends per second,
measured from evidence and smoothed, for the adaptive lease ceilings (`routing.lease_ceiling`).

Every `every_s` (`LEASEGATE_LEASE_RATE_INTERVAL_S`, 10 s) each control plane reads, in the
background, the requests and tokens the evidence rows of the last interval sent to each pair
and the pair's live leases now. The interval's lease-seconds are the mean of the live leases at
its two ends times its length; requests and tokens over lease-seconds are one sample, folded
into a moving average (`routing.lease_ceiling.smoothed`). A pair with no lease live at either end
keeps its average. A pair's first sample is folded into the prior (`prior`: the default
per-lease spend), not taken alone: leases minted during the interval, whose first answers
had not come back when it ended, would otherwise make a first sample far below the spend, and
the ceiling it sets far too high. Mints read `current()`: no I/O on the mint's path. Replicas
measure the same rows, so they agree closely without coordinating. A failed read is logged
and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.storage import LeaseSpendReader
from leasegate.routing.lease_ceiling import DEFAULT_ALPHA, LeaseRate, sampled, smoothed

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
        alpha: float = DEFAULT_ALPHA,
        prior: LeaseRate | None = None,
    ) -> None:
        self._prior = prior
        self._store = store
        self._accounts = tuple(account_ids)
        self._clock = clock
        self._every_s = every_s
        self._alpha = alpha
        self._rates: dict[Pair, LeaseRate] = {}
        self._last: tuple[datetime, Mapping[Pair, int]] | None = None
        self._task: asyncio.Task[None] | None = None

    def current(self) -> Mapping[Pair, LeaseRate]:
        return self._rates

    async def run_once(self) -> None:
        """One interval: since the previous call (the first only counts the live leases)."""
        now = self._clock.now()
        live = await self._store.live_leases_by_pair(self._accounts, now)
        if self._last is None:
            self._last = (now, live)
            return
        since, before = self._last
        seconds = (now - since).total_seconds()
        self._last = (now, live)
        if seconds <= 0:
            return
        spent = {
            (s.account_id, s.served_model): s for s in await self._store.spend_by_pair(since, now)
        }
        rates = dict(self._rates)
        for pair in {*before, *live}:
            lease_seconds = seconds * (before.get(pair, 0) + live.get(pair, 0)) / 2
            spend = spent.get(pair)
            sample = sampled(
                spend.requests if spend else 0,
                spend.input_tokens if spend else 0,
                spend.output_tokens if spend else 0,
                lease_seconds,
                spend.refused if spend else 0,
            )
            if sample is not None:
                rates[pair] = smoothed(rates.get(pair, self._prior), sample, self._alpha)
        self._rates = rates

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except StoreError as exc:
                log.warning("lease rates not measured", extra={"error": type(exc).__name__})
            await asyncio.sleep(self._every_s)
