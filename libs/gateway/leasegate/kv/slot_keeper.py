"""The proxy's side of request slots: take one per request, keep it alive, give it back once.

A request takes its slot at admission and gives it back when its response or stream ends,
however it ends; a long stream holds one slot all along, because the keeper renews every holder
this process still holds every `renew_every_s` (default `lease_s / 3`), one round trip per
account.

Reclamation bound: a process that dies (SIGKILL, OOM, a lost host) stops renewing, and each of
its slots stops counting at most `lease_s` after that process's last renewal, so within
`lease_s` of its death (plus clock skew between processes, assumed far below `lease_s`). With
the default `LEASEGATE_REQUEST_SLOT_LEASE_S` of 30 s: a crashed proxy's slots are back within
30 s. A release that fails in the store is retried in the background (backoff 0.1 s to 2 s)
until it succeeds or the lease has run out, whichever is first: after a Redis blip the slot
comes back as soon as Redis does, not a lease later.

Releases are batched: those asked for in one turn of the event loop (requests that ended
together) go to the store as one call per account, sent on the loop's next turn, and each
caller waits for that call. Under load this saves a round trip (and a task) per request; alone,
a release costs what it did.

Accounts without a ceiling (`request_capacity: null`) are not counted at all: no store call,
nothing to release.
"""

from __future__ import annotations

import asyncio
import logging

from leasegate.core.clock import Clock, to_epoch
from leasegate.core.ports.capacity import RequestSlots
from leasegate.core.ports.errors import StoreError
from leasegate.core.tasks import stop_task

logger = logging.getLogger(__name__)

_FIRST_RETRY_S = 0.1
_MAX_RETRY_S = 2.0


class SlotKeeper:
    def __init__(
        self, slots: RequestSlots, clock: Clock, renew_every_s: float | None = None
    ) -> None:
        interval = slots.lease_s / 3 if renew_every_s is None else renew_every_s
        if not 0 < interval < slots.lease_s:
            raise ValueError("renew_every_s must be positive and shorter than the lease")
        self._slots = slots
        self._clock = clock
        self._renew_every_s = interval
        # account -> holders this process may hold there. A holder is recorded *before* the
        # store call, so a request cancelled mid-acquire still releases what it may have taken.
        self._held: dict[str, set[str]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        self._queued: dict[str, list[str]] = {}
        """account -> holders whose release waits for the batch sent on the next turn"""
        self._batch: asyncio.Future[None] | None = None
        """Resolves after that batch's first store attempt (None: nothing queued)."""
        self._renewer: asyncio.Task[None] | None = None
        self._stopping = False

    async def acquire(self, account_id: str, holder: str, capacity: int | None) -> bool:
        """True when the request may proceed; False means 429 at once.

        Raises StoreUnavailable when the store cannot answer. The script may still have run (a
        partitioned Redis can deliver it late), so an unanswered acquire is released in the
        background, exactly like a failed release: the slot never waits for its lease.
        """
        if capacity is None:
            return True
        holders = self._held.setdefault(account_id, set())
        holders.add(holder)
        answered = taken = False
        try:
            taken = await self._slots.acquire(account_id, holder, capacity, self._now())
            answered = True
        finally:
            if not answered:
                self._release_in_background(account_id, holder)
            elif not taken:
                self._forget(account_id, holder)
        return taken

    async def release(self, account_id: str, holder: str) -> None:
        """Give back `holder`'s slot. Idempotent; never raises for a store error.

        The first store call runs shielded, so a request whose task is being cancelled (the
        client went away) still returns its slot now rather than a lease later. If it fails
        (Redis restarting, a stale connection), the release is retried in the background, with
        backoff, until it succeeds or the slot's lease has run out anyway; the caller does not
        wait for the retries.
        """
        first = self._release_in_background(account_id, holder)
        if first is not None:
            await asyncio.shield(first)

    def _release_in_background(self, account_id: str, holder: str) -> asyncio.Future[None] | None:
        """Queue `holder`'s release for this turn's batch; the future resolves after the
        batch's first store attempt. None when this process does not hold it (already
        released)."""
        if not self._forget(account_id, holder):
            return None
        self._queued.setdefault(account_id, []).append(holder)
        batch = self._batch
        if batch is None:
            batch = self._batch = asyncio.get_running_loop().create_future()
            # a task's first step runs on the loop's next turn: every release queued in this
            # turn is in the batch by then
            self._track(asyncio.create_task(self._send_batch(batch)))
        return batch

    async def _send_batch(self, first: asyncio.Future[None]) -> None:
        queued, self._queued, self._batch = self._queued, {}, None
        try:
            if len(queued) == 1:
                [(account_id, holders)] = queued.items()
                await self._release_in_store(account_id, holders, first)
                return
            firsts = [asyncio.get_running_loop().create_future() for _ in queued]
            for (account_id, holders), attempted in zip(queued.items(), firsts, strict=True):
                self._track(
                    asyncio.create_task(self._release_in_store(account_id, holders, attempted))
                )
            await asyncio.gather(*firsts)
        finally:
            if not first.done():
                first.set_result(None)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    def holding(self, account_id: str) -> int:
        """How many slots this process holds (or is taking) on the account."""
        return len(self._held.get(account_id, ()))

    async def renew_held(self) -> None:
        """Renew every holder this process still holds: one round trip per account."""
        now = self._now()
        for account_id, holders in list(self._held.items()):
            if not holders:
                continue
            try:
                await self._slots.renew(account_id, sorted(holders), now)
            except StoreError as exc:
                # The next round tries again; a lease outlives two missed rounds.
                logger.warning("request slot renewal failed on %s: %s", account_id, exc)

    def start(self) -> None:
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_forever(), name="slot-keeper")

    async def stop(self) -> None:
        """Stop renewing and give back every slot this process still holds (one attempt
        each: retries in progress stop after their current try)."""
        self._stopping = True
        renewer, self._renewer = self._renewer, None
        await stop_task(renewer)
        leftovers = [(account, holder) for account, hs in self._held.items() for holder in hs]
        await asyncio.gather(*(self.release(account, holder) for account, holder in leftovers))
        if self._releasing:
            await asyncio.gather(*self._releasing)

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self._renew_every_s)
            await self.renew_held()

    async def _release_in_store(
        self, account_id: str, holders: list[str], first: asyncio.Future[None]
    ) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self._slots.lease_s  # renewed at most lease_s ago
        delay = _FIRST_RETRY_S
        try:
            while True:
                try:
                    await self._slots.release(account_id, holders)
                    return
                except StoreError as exc:
                    error = exc.reason
                if not first.done():
                    first.set_result(None)
                if self._stopping or loop.time() + delay >= give_up_at:
                    logger.warning(
                        "request slot release failed on %s (%d held); their lease reclaims "
                        "them (%s)",
                        account_id,
                        len(holders),
                        error,
                    )
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_S)
        finally:
            if not first.done():
                first.set_result(None)

    def _forget(self, account_id: str, holder: str) -> bool:
        holders = self._held.get(account_id)
        if holders is None or holder not in holders:
            return False
        holders.discard(holder)
        if not holders:
            del self._held[account_id]
        return True

    def _now(self) -> float:
        return to_epoch(self._clock.now())
