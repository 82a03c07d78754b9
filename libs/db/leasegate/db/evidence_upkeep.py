"""The control plane's background upkeep of the evidence table: partitions ahead, retention.

Every `every_s` (hourly), and once at start-up: create the partitions of yesterday, today and
the next `DAYS_AHEAD` days that are missing (Postgres only), then, when a retention is set,
remove every row older than `retention_days` whole UTC days before today (dropping whole
partitions on Postgres). Every control-plane replica runs it; the advisory lock inside
`EvidencePartitions` makes concurrent runs queue, and every step is idempotent, so replicas
need no coordination. A failed run (the database away) is logged and retried a minute later.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.tasks import stop_task
from leasegate.db.partitions import DAYS_AHEAD, EvidencePartitions

log = logging.getLogger("leasegate.evidence")

EVERY_S = 3600.0
RETRY_S = 60.0


class EvidenceUpkeep:
    def __init__(
        self,
        partitions: EvidencePartitions,
        clock: Clock,
        retention_days: int | None,
        *,
        every_s: float = EVERY_S,
        retry_s: float = RETRY_S,
    ) -> None:
        self._partitions = partitions
        self._clock = clock
        self._retention_days = retention_days
        self._every_s = every_s
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> None:
        today = self._clock.now().date()
        created = await self._partitions.ensure(today, DAYS_AHEAD)
        if created:
            log.info("evidence partitions created", extra={"partitions": created})
        if self._retention_days is None:
            return
        before = today - timedelta(days=self._retention_days)
        pruned = await self._partitions.prune(before)
        if pruned.dropped or pruned.deleted_rows:
            log.info(
                "evidence past retention removed",
                extra={
                    "before": before.isoformat(),
                    "partitions_dropped": pruned.dropped,
                    "rows_deleted": pruned.deleted_rows,
                },
            )

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
                delay = self._every_s
            except StoreError as exc:
                log.warning("evidence upkeep failed", extra={"error": exc.reason})
                delay = self._retry_s
            await asyncio.sleep(delay)
