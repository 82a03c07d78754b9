"""Each account's usage since midnight UTC, for the accounts view: summed at most once per
`max_age_s` (a busy day has millions of rows; the view is polled)."""

from __future__ import annotations

from datetime import datetime, timedelta

from leasegate.core.clock import Clock
from leasegate.core.ports.usage import UsageGroup, UsageReader
from leasegate.spend import period_start


class TodaysSpend:
    def __init__(self, usage: UsageReader, clock: Clock, max_age_s: float = 30.0) -> None:
        self._usage = usage
        self._clock = clock
        self._max_age_s = max_age_s
        self._cached: tuple[float, datetime, dict[str | None, UsageGroup]] | None = None

    async def by_account(self) -> dict[str | None, UsageGroup]:
        now = self._clock.now()
        day = period_start(now, "day")
        cached = self._cached
        if (
            cached is not None
            and cached[1] == day
            and self._clock.monotonic() - cached[0] < self._max_age_s
        ):
            return cached[2]
        found = await self._usage.usage(
            day, now + timedelta(microseconds=1), ("account",), limit=10_000
        )
        totals = {group.keys["account"]: group for group in found}
        self._cached = (self._clock.monotonic(), day, totals)
        return totals
