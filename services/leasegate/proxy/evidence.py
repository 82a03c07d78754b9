"""Evidence rows leave the request path through a buffer written in batches in the background.

The response never waits for the database. A failed write keeps the batch and retries with
backoff, so a briefly unreachable database loses nothing; `stop()` flushes what is left within
the drain time. Only if the buffer outgrows `max_buffered` (the database down for a long time
under load) are the oldest rows dropped, counted and logged rather than exhausting memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from sqlalchemy.exc import SQLAlchemyError

from leasegate.core.ports.storage import EvidenceWriter
from leasegate.core.records import EvidenceRow

log = logging.getLogger("leasegate.evidence")

# The store raises SQLAlchemy's errors for an unreachable or refusing database, and OSError
# for a socket that went away underneath it.
WRITE_ERRORS = (SQLAlchemyError, OSError)


class EvidenceSink:
    def __init__(
        self,
        writer: EvidenceWriter,
        *,
        flush_interval_s: float,
        max_batch: int = 500,
        max_buffered: int = 200_000,
    ) -> None:
        self._writer = writer
        self._interval = flush_interval_s
        self._max_batch = max_batch
        self._max_buffered = max_buffered
        self._rows: deque[EvidenceRow] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def add(self, row: EvidenceRow) -> None:
        """Queue a row; never blocks, never raises."""
        self._rows.append(row)
        if len(self._rows) > self._max_buffered:
            self._rows.popleft()
            self.dropped += 1
            log.error("evidence buffer full: dropped the oldest row")
        if len(self._rows) >= self._max_batch:
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._rows)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self, drain_s: float) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_s):
                while self._rows:
                    if not await self._flush_once():
                        await asyncio.sleep(0.2)
        if self._rows:
            log.error("evidence rows not written at shutdown", extra={"rows": len(self._rows)})

    async def flush(self) -> None:
        """Write everything buffered now (tests and shutdown)."""
        while self._rows:
            if not await self._flush_once():
                raise ConnectionError("evidence could not be written")

    async def _run(self) -> None:
        backoff = self._interval
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._wake.wait()
            self._wake.clear()
            ok = True
            while self._rows and ok:
                ok = await self._flush_once()
            backoff = self._interval if ok else min(max(backoff * 2, 0.1), 5.0)

    async def _flush_once(self) -> bool:
        batch = [self._rows[i] for i in range(min(self._max_batch, len(self._rows)))]
        try:
            await self._writer.write_evidence(batch)
        except WRITE_ERRORS as exc:
            log.warning(
                "evidence write failed; will retry",
                extra={"rows": len(batch), "error": type(exc).__name__},
            )
            return False
        for _ in batch:
            self._rows.popleft()
        return True
