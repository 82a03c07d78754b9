"""Evidence rows leave the request path through a buffer written in batches in the background.

The response never waits for a success row. A qualifying failure's row is written at once
(`add_durable`), so the hop that cites it finds it; if the database cannot take it within
`durable_timeout_s` it joins the buffer like any other row.

Two kinds of failed write are told apart, as the store raises them (`StoreUnavailable`,
`StoreRejected`):

- the database is unreachable: the batch is kept and retried with backoff. With a spill file
  (evidence_spill.py), every row waiting in memory moves to it at once, and every new row goes
  straight to it, until the database has taken everything again: a process killed during an
  outage loses at most the rows of its last flush interval (the file is fsynced every interval
  while it grows). A batch write still unfinished after `STALL_S` (a database that hangs
  rather than refuses) counts the same for this purpose: its rows are copied to the file too,
  and a copy replayed after the write did land is ignored by the insert. Without a spill file
  rows wait in memory up to `memory_rows`, then the oldest are dropped. Either way the spill
  file is replayed once the database answers again;
- the database refused a row's content: the batch is split in halves until the offending rows
  are alone; each is dead-lettered (one JSON log line with its request id, key id and the
  driver's error class, never a value, and `leasegate_evidence_dead_letter_total`), every
  other row is written.

While the database takes every batch, rows stay in memory only and nothing is fsynced.

Batches follow the rate, so a row costs about the same from 10 to 1,000 rows a second (one
INSERT, and the wake-up its reply makes, shared by the rows of a batch; `write_due`); below
one row per `linger_s` each row is still an INSERT of its own:

- a row that finds the last batch begun `linger_s` ago or more (under one row per `linger_s`)
  is written at once: there is nothing to batch it with;
- otherwise rows gather until the oldest has waited `linger_s` (written when the next row
  arrives, on that row's own turn of the loop: no timer), or `linger_rows` are waiting, or a
  full batch; when no row follows, a timer writes them `2 * linger_s` after the oldest;
- batches begin at most one flush interval apart, except a full one.

So no row waits in memory longer than `2 * linger_s + flush_interval_s` before its batch
begins, and no more rows wait than `linger_rows` or one flush interval's, whichever is more:
what a process killed outright loses (before the linger, one flush interval's: also 50 at
1,000 rows a second). `linger_s` 0: each row opens a flush interval's window, as before.

`stop()` flushes what is left within the drain time; rows that still cannot be written go to
the spill file when there is one, so a restarted process writes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence

from leasegate.core.ports.errors import StoreRejected, StoreUnavailable, failure_reason
from leasegate.core.ports.storage import EvidenceWriter
from leasegate.core.records import EvidenceRow
from leasegate.core.tasks import stop_task
from leasegate.proxy.evidence_metrics import EvidenceMetrics
from leasegate.proxy.evidence_spill import SpillFile

log = logging.getLogger("leasegate.evidence")

MAX_BACKOFF_S = 5.0
DEAD_LETTER_EVENT = "evidence row refused by the database: dead-lettered"
BATCH_TIMEOUT_S = 10.0
"""A batch write that has not finished by then counts as unreachable (a silent partition)."""
STALL_S = 1.0
"""A batch write unfinished after this long sends the rows waiting to the spill file (the
default of `stall_s`)."""
LINGER_S = 0.5
LINGER_ROWS = 50


def write_due(
    *,
    now: float,
    rows: int,
    oldest_at: float,
    began: float,
    retry_at: float,
    interval_s: float,
    linger_s: float,
    linger_rows: int,
    max_batch: int,
) -> float:
    """When the rows waiting in memory are to be written (the module docstring's rules).
    `oldest_at`: when the oldest of them arrived; `began`: when the last batch began;
    `retry_at`: not before (a failed write's backoff). All on one monotonic clock."""
    if rows >= max_batch:
        return retry_at
    if rows == 0:  # the spill file's rows: one interval apart
        lingered = now
    elif oldest_at - began >= linger_s:  # alone at a low rate: nothing to batch it with
        lingered = oldest_at
    elif rows >= linger_rows or now - oldest_at >= linger_s:
        lingered = min(now, oldest_at + 2 * linger_s)
    else:
        lingered = oldest_at + 2 * linger_s  # unless a later row writes them sooner (add)
    return max(began + interval_s, retry_at, lingered)


class EvidenceSink:
    def __init__(
        self,
        writer: EvidenceWriter,
        *,
        flush_interval_s: float,
        max_batch: int = 500,
        memory_rows: int = 200_000,
        durable_timeout_s: float = 2.0,
        spill: SpillFile | None = None,
        metrics: EvidenceMetrics | None = None,
        stall_s: float = STALL_S,
        linger_s: float = LINGER_S,
        linger_rows: int = LINGER_ROWS,
    ) -> None:
        self._writer = writer
        self._interval = flush_interval_s
        self._max_batch = max_batch
        self._memory_rows = memory_rows
        self._durable_timeout_s = durable_timeout_s
        self._spill = spill
        self._stall_s = stall_s
        self._linger_s = linger_s
        self._linger_rows = linger_rows
        self._oldest_at = 0.0
        """When the oldest row waiting in memory arrived (`time.monotonic`)."""
        self._metrics = metrics or EvidenceMetrics(None)
        self._rows: deque[EvidenceRow] = deque()
        self._wake = asyncio.Event()
        """Set when the rows waiting may be due sooner than the writer's timer: a full batch,
        `linger_rows` of them, or the oldest having lingered."""
        self._arrived = asyncio.Event()
        """Set by every row: an idle writer sleeps on it, with no timer."""
        self._task: asyncio.Task[None] | None = None
        self._flushing = asyncio.Lock()
        """One batch at a time: a drain waits for the background batch under way, so it never
        reports "nothing left" while rows taken from memory are still being written."""
        self._in_flight = 0
        """Rows taken from memory by the batch under way (counted in `pending`)."""
        self._syncs: set[asyncio.Task[None]] = set()
        self._reachable = True
        self._to_disk = spill is not None and spill.pending > 0
        """New rows go straight to the spill file: the database is not taking batches, or
        the file still holds rows (kept first, in order)."""
        self.dropped = 0
        self.dead_lettered = 0

    def add(self, row: EvidenceRow) -> None:
        """Queue a row; never blocks, never raises."""
        if self._to_disk or len(self._rows) >= self._memory_rows:
            self._overflow(row)
        else:
            self._rows.append(row)
            rows = len(self._rows)
            if rows == 1:
                self._oldest_at = time.monotonic()
            elif (
                rows >= self._max_batch
                or rows == self._linger_rows
                or time.monotonic() - self._oldest_at >= self._linger_s
            ):
                self._wake.set()
        self._arrived.set()
        self._metrics.queued(len(self._rows))

    async def add_durable(self, row: EvidenceRow) -> None:
        """Write the row now (a qualifying failure: a hop will cite it); if the database does
        not take it within `durable_timeout_s`, queue it instead. Never raises."""
        if not self._reachable:
            self.add(row)  # known to be down: do not make the caller wait for a timeout
            return
        try:
            await self._write([row], timeout_s=self._durable_timeout_s)
        except StoreRejected as rejected:
            self._dead_letter(row, rejected.reason)
        except Exception as exc:  # unreachable (or a bug): the buffer retries it
            log.warning("evidence write failed; queued", extra={"error": failure_reason(exc)})
            self.add(row)

    @property
    def pending(self) -> int:
        """Rows not yet written: in memory and in the spill file."""
        on_disk = self._spill.pending if self._spill else 0
        return len(self._rows) + self._in_flight + on_disk

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self, drain_s: float) -> None:
        await stop_task(self._task)
        self._task = None
        await self.drain(drain_s)
        if self._rows and self._spill is not None:
            # the spill file outlives the process: its successor replays these
            while self._rows and self._spill.append(self._rows[0]):
                self._rows.popleft()
        if self._rows:
            log.error("evidence rows not written at shutdown", extra={"rows": len(self._rows)})
        elif self.pending:
            log.warning(
                "evidence rows left in the spill file for the next start",
                extra={"rows": self.pending},
            )
        if self._spill is not None:
            self._spill.close()

    async def drain(self, within_s: float) -> bool:
        """Write everything waiting (memory, then the spill file), a failed batch retried every
        0.2 s, for at most `within_s`; True when nothing is left (`stop` drains first)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                while self.pending:
                    if not await self._flush_once():
                        await asyncio.sleep(0.2)
        return not self.pending

    async def _run(self) -> None:
        backoff, retry_at = self._interval, 0.0
        began = float("-inf")
        """When the last batch was begun (`time.monotonic`, as every time of the sink's)."""
        while True:
            if not self.pending:
                # idle: no timer at all until a row arrives
                self._arrived.clear()
                await self._arrived.wait()
            self._wake.clear()
            while (wait := self._due(began, retry_at) - time.monotonic()) > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                self._wake.clear()
            if time.monotonic() >= retry_at:
                began = time.monotonic()
                ok = True
                while self.pending and ok:
                    ok = await self._flush_once()
                if ok:
                    backoff, retry_at = self._interval, 0.0
                else:
                    backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF_S)
                    retry_at = time.monotonic() + backoff
            if not self._reachable:
                self._evacuate()
            if self._spill is not None:
                await self._spill.sync_async()  # nothing to do unless rows were appended

    def _due(self, began: float, retry_at: float) -> float:
        return write_due(
            now=time.monotonic(),
            rows=len(self._rows),
            oldest_at=self._oldest_at,
            began=began,
            retry_at=retry_at,
            interval_s=self._interval,
            linger_s=self._linger_s,
            linger_rows=self._linger_rows,
            max_batch=self._max_batch,
        )

    async def _flush_once(self) -> bool:
        """Write one batch (memory first, then the spill file), after any batch under way;
        False if the database is unreachable."""
        async with self._flushing:
            return await self._flush_batch()

    async def _flush_batch(self) -> bool:
        spill = self._spill if not self._rows and self._spill and self._spill.pending else None
        if spill is not None:
            batch = spill.peek(self._max_batch)
        else:
            batch = [self._rows.popleft() for _ in range(min(self._max_batch, len(self._rows)))]
            self._in_flight = len(batch)
        try:
            return await self._write_batch(batch, spill)
        finally:
            self._in_flight = 0

    async def _write_batch(self, batch: list[EvidenceRow], spill: SpillFile | None) -> bool:
        on_disk = spill is not None

        def stalled() -> None:
            nonlocal on_disk
            if not on_disk:
                on_disk = self._to_spill(batch) == len(batch)
            self._evacuate()

        try:
            await self._watched(self._write_isolating(batch), stalled)
        except (StoreUnavailable, TimeoutError) as exc:  # TimeoutError: the batch's deadline
            log.warning(
                "evidence write failed; will retry",
                extra={"rows": len(batch), "error": failure_reason(exc)},
            )
            self._keep(batch, on_disk)
            return False
        except Exception:
            # a bug, not the database: keep the rows and the writer, say so loudly
            log.exception("evidence write failed unexpectedly; will retry")
            self._keep(batch, on_disk)
            return False
        except BaseException:  # cancelled (a drain's deadline, stop): the rows stay
            self._keep(batch, on_disk)
            raise
        if spill is not None:
            spill.consume()
        if self._spill is not None and (spill is not None or self._to_disk):
            self._to_disk = self._spill.pending > 0
            self._metrics.spilled(self._spill.pending, self._spill.size_bytes)
        self._metrics.queued(len(self._rows))
        return True

    def _keep(self, batch: list[EvidenceRow], on_disk: bool) -> None:
        """A batch from memory that was not written goes back to the front of the queue
        (unless it is in the spill file already)."""
        if not on_disk:
            self._rows.extendleft(reversed(batch))

    async def _watched(self, write: Awaitable[None], stalled: Callable[[], None]) -> None:
        """Await `write`; if it is still unfinished after `stall_s` (with a spill file), call
        `stalled` then, and fsync the file every flush interval until it ends. Only a timer
        is armed for this: nothing more per batch while writes are quick."""
        spill = self._spill
        if spill is None:
            await write
            return
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle

        def tick(first: bool) -> None:
            nonlocal timer
            if first:
                stalled()
            sync = loop.create_task(spill.sync_async())
            self._syncs.add(sync)
            sync.add_done_callback(self._syncs.discard)
            timer = loop.call_later(self._interval, tick, False)

        timer = loop.call_later(self._stall_s, tick, True)
        try:
            await write
        finally:
            timer.cancel()

    async def _write_isolating(self, batch: Sequence[EvidenceRow]) -> None:
        """Write `batch`; rows the database refuses are found by bisection and dead-lettered.

        A connectivity error anywhere propagates: the caller keeps the whole batch (rows
        already written are ignored when it is replayed)."""
        if not batch:
            return
        try:
            await self._write(batch)
        except StoreRejected as rejected:
            if len(batch) == 1:
                self._dead_letter(batch[0], rejected.reason)
                return
            middle = len(batch) // 2
            await self._write_isolating(batch[:middle])
            await self._write_isolating(batch[middle:])

    async def _write(self, rows: Sequence[EvidenceRow], timeout_s: float = BATCH_TIMEOUT_S) -> None:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                await self._writer.write_evidence(rows)
        except (StoreUnavailable, TimeoutError):
            self._reachable = False
            if self._spill is not None:
                self._to_disk = True  # new rows go to disk; _run moves the waiting ones
            raise
        self._reachable = True
        self._metrics.flushed(time.perf_counter() - started)

    def _overflow(self, row: EvidenceRow) -> None:
        if self._spill is not None:
            if self._spill.append(row):
                self._to_disk = True
                self._metrics.spilled(self._spill.pending, self._spill.size_bytes)
                return
            self._metrics.spill_failed()
            self._to_disk = False  # the disk refused it: memory until the next evacuation
        # no spill file, or the disk refused it: memory is the last resort, then the oldest go
        self._rows.append(row)
        limit = self._memory_rows * 2 if self._spill is not None else self._memory_rows
        if len(self._rows) > limit:
            lost = self._rows.popleft()
            self.dropped += 1
            self._metrics.dropped()
            log.error(
                "evidence buffer full: dropped the oldest row",
                extra={"request_id": lost.request_id},
            )

    def _evacuate(self) -> None:
        """Move every row waiting in memory to the spill file (the database is not taking
        them); from now on new rows go there directly."""
        if self._spill is None:
            return
        self._to_disk = True
        moved = self._to_spill(self._rows)
        for _ in range(moved):
            self._rows.popleft()
        if moved:
            self._metrics.spilled(self._spill.pending, self._spill.size_bytes)
            self._metrics.queued(len(self._rows))

    def _to_spill(self, rows: Iterable[EvidenceRow]) -> int:
        """Append `rows` in order until the disk refuses one; how many were appended."""
        appended = 0
        for row in rows:
            if self._spill is None or not self._spill.append(row):
                self._metrics.spill_failed()
                self._to_disk = False
                break
            appended += 1
        return appended

    def _dead_letter(self, row: EvidenceRow, reason: str) -> None:
        self.dead_lettered += 1
        self._metrics.dead_lettered()
        log.error(
            DEAD_LETTER_EVENT,
            extra={
                "request_id": row.request_id,
                "key_id": row.key_id,
                "reason": reason,
            },
        )
