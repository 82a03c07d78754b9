"""Key resolution on the hot path: a process-local cache in front of the keys table.

A cached record saves the database round trip; revocations arrive by fan-out and land in a
deny list kept until the key would have expired anyway, so a revoked key is refused by every
replica at once. The deny list is checked after a database read as well, which closes the race
where a revocation lands while the read is in flight. When the fan-out reconnects (messages may
have been lost) the cache is dropped and the database answers until it warms again; while
the fan-out is down (`FanoutTrust.trusted` false: its heartbeat went unanswered, or it is
reconnecting) an entry is trusted for at most `UNTRUSTED_TTL_S` since it was read, so a
revocation the fan-out cannot deliver is seen in the database within that long. After an
idle spell the fan-out is confirmed by one heartbeat the whole burst waits for
(`FanoutTrust.confirmed`), not by a database read per key.

While the database cannot answer (down, or past its deadline), a key whose cache entry has
aged out keeps being served from that entry: a partition does not refuse the keys a proxy
already knows. Expiry and revocations by fan-out still apply to it; only a key this process
has never seen needs the database (503 `unavailable` while it is out).

Memory follows live work: a cache entry not read again from the database for `RETAIN_S` past
its TTL (the key went quiet, or was revoked or expired) is removed, and a revoked key leaves
the deny list once it has expired. Both are swept a bounded number at a time, oldest first,
on every resolution and revocation and by `sweep()` (called by a slow timer, so an idle
process shrinks too); nothing is swept while the database is out, so the keys a partition
keeps serving stay.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import OrderedDict
from collections.abc import Sequence

from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.fanout import FanoutTrust
from leasegate.core.ports.revocation import Revocation
from leasegate.core.ports.storage import KeyReader
from leasegate.core.records import KeyRecord
from leasegate.core.tasks import stop_task
from leasegate.keys import ParsedKey, parse_key, secret_matches

_MAX_ENTRIES = 100_000
STALE_GRACE_S = 5.0
"""After a failed database read, known keys are served from the cache this long untried."""
UNTRUSTED_TTL_S = 1.0
"""How long a cache entry is trusted while revocations cannot arrive by fan-out."""
RETAIN_S = 300.0
"""An entry aged out of the cache this long ago (its key was not used since) is removed."""
SWEEP_BATCH = 256
"""Entries removed at most per sweep, so no request pays for a large one."""
SWEEP_EVERY_S = 30.0
"""The background sweep's period: an idle process shrinks too, at a negligible wake-up cost."""


class KeyRefused(GatewayError):
    """A real key that may not be used any more; carries its record for the evidence row."""

    def __init__(self, record: KeyRecord, code: str, message: str) -> None:
        super().__init__(code, message)
        self.record = record


class KeyResolver:
    def __init__(
        self,
        reader: KeyReader,
        clock: Clock,
        ttl_s: float,
        *,
        fanout: FanoutTrust | None = None,
        retain_s: float = RETAIN_S,
    ) -> None:
        self._reader = reader
        self._clock = clock
        self._ttl_s = ttl_s
        self._fanout = fanout
        """The revocation bus; None: every revocation arrives (one process)."""
        self._retain_s = retain_s
        # every entry gets the same TTL when read, so insertion order is expiry order
        self._cache: OrderedDict[str, tuple[KeyRecord, float]] = OrderedDict()
        """key id: (record, when it was read, monotonic)"""
        self._revoked: dict[str, float] = {}
        self._revoked_by_expiry: list[tuple[float, str]] = []
        self._database_out_until = 0.0
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="key-cache-sweep")

    async def stop(self) -> None:
        await stop_task(self._sweeper)
        self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            more = True
            while more:  # a long backlog is removed in slices, yielding between them
                more = self.sweep()
                await asyncio.sleep(0)

    @property
    def sizes(self) -> tuple[int, int]:
        """(cached keys, revoked keys held): what the process holds for keys."""
        return len(self._cache), len(self._revoked)

    def sweep(self) -> bool:
        """Remove up to SWEEP_BATCH cache entries unused for `retain_s` past their TTL and
        up to SWEEP_BATCH revoked keys past their expiry; True when more may be due."""
        now = self._clock.monotonic()
        if now < self._database_out_until:
            return False  # a partition serves known keys from here: keep them
        cache, horizon = self._cache, now - self._retain_s
        removed = 0
        while cache and removed < SWEEP_BATCH:
            key_id, (_, read_at) = next(iter(cache.items()))
            if read_at + self._ttl_s > horizon:
                break
            del cache[key_id]
            removed += 1
        wall = self._clock.now().timestamp()
        heap, popped = self._revoked_by_expiry, 0
        while heap and heap[0][0] <= wall and popped < SWEEP_BATCH:
            expires_at, key_id = heapq.heappop(heap)
            popped += 1
            if self._revoked.get(key_id) == expires_at:
                del self._revoked[key_id]
        return removed == SWEEP_BATCH or popped == SWEEP_BATCH

    async def resolve(self, parsed: ParsedKey) -> KeyRecord:
        """The live key for a presented token, or the refusal (`key-*`) that applies."""
        record = await self._lookup(parsed.key_id)
        if record is None or not secret_matches(parsed.secret, record.secret_hash):
            raise GatewayError("key-invalid", "the key is not valid")
        if record.revoked_at is not None or parsed.key_id in self._revoked:
            raise KeyRefused(record, "key-revoked", "the key has been revoked")
        if self._clock.now() >= record.expires_at:
            raise KeyRefused(record, "key-expired", "the key has expired")
        return record

    async def _lookup(self, key_id: str) -> KeyRecord | None:
        now = self._clock.monotonic()
        hit = self._cache.get(key_id)
        if hit is not None:
            age, fanout = now - hit[1], self._fanout
            if age < min(self._ttl_s, UNTRUSTED_TTL_S) or now < self._database_out_until:
                return hit[0]
            # past the short trust: the fan-out must vouch for it; after a wait for its
            # heartbeat, only if not removed meanwhile (a revocation, a reset, delivered first)
            if age < self._ttl_s and (
                fanout is None
                or fanout.trusted()
                or (await fanout.confirmed() and self._cache.get(key_id) is hit)
            ):
                return hit[0]
        try:
            record = await self._reader.get_key(key_id)
        except StoreError:
            # The database cannot answer: for the next STALE_GRACE_S, known keys do not wait
            # for its deadline, and a key this process already knows keeps serving. resolve()
            # still refuses it once expired or revoked (fan-out lands in the deny list).
            self._database_out_until = self._clock.monotonic() + STALE_GRACE_S
            if hit is None:
                raise
            return hit[0]
        if record is not None and record.revoked_at is None and key_id not in self._revoked:
            self._cache[key_id] = (record, now)
            self._cache.move_to_end(key_id)
            if len(self._cache) > _MAX_ENTRIES:
                self._cache.popitem(last=False)
        self.sweep()  # after a database read only: a cache hit stays as cheap as it was
        return record

    def on_revoked(self, revocations: Sequence[Revocation]) -> None:
        wall = self._clock.now().timestamp()
        for revocation in revocations:
            self._cache.pop(revocation.key_id, None)
            if revocation.expires_at > wall and revocation.key_id not in self._revoked:
                self._revoked[revocation.key_id] = revocation.expires_at
                heapq.heappush(self._revoked_by_expiry, (revocation.expires_at, revocation.key_id))
        self.sweep()

    def on_reset(self) -> None:
        self._cache.clear()


__all__ = ["KeyRefused", "KeyResolver", "parse_key"]
