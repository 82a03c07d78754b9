"""The proxy's process-local view of each (account, served model)'s quota.

Fed by every answer (its rate-limit headers, `ProviderKind.quota_buckets`), by rate-limit
429s, and by the accounts file's declared limits; read by the admission check before a request
goes upstream. No request waits on a store: what this proxy learns is written to the shared
`QuotaStore` behind the requests, in one batch `flush_s` after a statement waits (no timer
while none does), and what the other proxies learned is read back every `refresh_s` while
requests use the view (one round trip each, off the request path); an idle view (no request
since its last refresh) refreshes every `IDLE_REFRESH_S`, and at once when requests come
back. A newer statement (by its `observed_at`) replaces an older one; this proxy's own
admissions since the last statement are spent from its local copy only.

Requests in flight are counted: each admitted request (its `ref`) holds its estimate until its
answer. An answer's headers are taken only when its request was sent after the one whose
headers the view last took (the answers of concurrent requests arrive in any order; the
newest statement is the one about the most recently sent request), and what the requests sent
after it and still unanswered hold is spent again from them: the provider had not counted
those yet. A statement read from the store is treated the same way for the requests this
proxy admitted after it was observed.

Quota news: when an answer leaves a pair without room for a request like it (its headers say
so), or a rate-limit 429 holds it, the statement is also published at once on the health news
channel (`QuotaNewsBus`, in a task of its own: no request waits for it), and every other
proxy's view takes it in as it takes a refresh, so they refuse the pair before sending instead
of learning it from the provider's 429 or the next refresh.

With `probe_requests` set (0, off, by default), a pair nothing is known of (no quota
declared, learned or heard from another proxy, no answer yet) is probed: at most
`probe_requests` requests on it are in flight from this proxy until its first answer's headers
arrive (a request past them is refused for `PROBE_RETRY_S` at most; the bound doubles every
`PROBE_DOUBLING_S` the answer is awaited), so a fleet does not spend what the provider has not
yet said it has; the headers of that first answer are taken as they arrive, not at its end (a
stream may take minutes).

A pair that answers without any rate-limit header (and of which nothing is known) is written
to the store as an empty statement, once a minute: the mints then know it has answered and
states nothing, and stop probing it (docs/capacity.md); the views ignore it.

Declared limits are not shared: each proxy counts what it sends against them, so N proxies
behind one declared-only account may send up to N times its declared rate (the provider's
own 429s then hold the pair, which every proxy does hear of).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension, QuotaNewsBus, QuotaStore
from leasegate.core.tasks import stop_task
from leasegate.providers import Usage
from leasegate.routing.quota import (
    Estimate,
    declared_quota,
    hold_s,
    learned,
    learned_behind,
    rate_limit_hold,
    reconciled,
    returned,
    room_at,
    spent,
    total,
)

log = logging.getLogger("leasegate.proxy")

Pair = tuple[str, str]

_SYSTEM_RANDOM = random.SystemRandom()

_NOTHING = Estimate(0, 0)
"""A request asking for nothing: what an answer is judged against when its cost is unknown."""
SILENT_EVERY_S = 60.0
"""How often the store is told again that a pair answers without rate-limit headers (an
empty statement: the mints' probe lifts for it; the store forgets it after its retention)."""
IDLE_REFRESH_S = 10.0
"""How often an idle view (no request since its last refresh) reads what the other proxies
learned; a busy one reads it every `refresh_s`."""
IN_FLIGHT_MAX_S = 900.0
"""A reservation whose answer never came (it cannot happen: every attempt ends) is dropped
after this long, so the view cannot leak room."""
PROBE_DOUBLING_S = 1.0
"""While a probed pair's first answer is awaited, the requests it may have in flight double
every this long (from `probe_requests`): a provider slow to send its headers (a long
completion not streamed) holds the pair's other requests back for a few seconds at most, not
for as long as that answer takes."""
PROBE_RETRY_S = 0.5
"""A request the probe refused is told to come back after this (a first answer's time), or
at the next doubling if that is sooner."""


def _speaks(buckets: Mapping[QuotaDimension, Bucket], status: int) -> bool:
    """Whether an answer tells the view something of its pair's quota: rate-limit headers,
    or a success without them (such a pair states nothing; a server error may just lack
    them)."""
    return bool(buckets) or status < 400


@dataclass(frozen=True, slots=True)
class _InFlight:
    seq: int
    """Admission order (the order requests are sent upstream)."""
    admitted_at: float
    cost: Estimate


class QuotaView:
    def __init__(
        self,
        store: QuotaStore,
        registry: Registry,
        clock: Clock,
        *,
        flush_s: float = 0.25,
        refresh_s: float = 1.0,
        rng: Callable[[], float] = _SYSTEM_RANDOM.random,
        news: QuotaNewsBus | None = None,
        probe_requests: int = 0,
    ) -> None:
        self.store = store
        self._probe = probe_requests
        """Requests in flight on a pair nothing is known of (0: no bound)."""
        self._heard_from: set[Pair] = {
            (account.id, model)
            for account in registry.accounts
            if not account.kind.states_quota  # nothing to learn from its answers: no probe
            for model in account.models.values()
        }
        """Pairs that have answered (here or, as an empty statement, on another proxy), and
        those of kinds that never state their quota."""
        self._bus = news
        self._news: dict[Pair, Quota] = {}
        """Statements of exhausted pairs waiting to be published (one batch per loop turn)."""
        self._publishing: asyncio.Task[None] | None = None
        self._clock = clock
        self._flush_s = flush_s
        self._refresh_s = refresh_s
        self._rng = rng
        self._pairs: list[Pair] = [
            (account.id, model)
            for account in registry.accounts
            for model in dict.fromkeys(account.models.values())
        ]
        self._known = frozenset(self._pairs)
        now = clock.now().timestamp()
        self._local: dict[Pair, Quota] = {}
        self._defaults: dict[Pair, int] = {}
        for account in registry.accounts:
            for model, limits in account.limits.items():
                if (quota := declared_quota(account.id, model, limits, now)) is not None:
                    self._local[(account.id, model)] = quota
                if limits.output_estimate is not None:
                    self._defaults[(account.id, model)] = limits.output_estimate
        self._stated_at: dict[Pair, float] = {}
        """When the provider's latest statement this view holds was observed, per pair."""
        self._dirty: dict[Pair, Quota] = {}
        self._in_flight: dict[Pair, dict[str, _InFlight]] = {}
        self._seq = 0
        self._taken_seq: dict[Pair, int] = {}
        """The admission order of the request whose answer's headers the view last took."""
        self._silent: dict[Pair, float] = {}
        """When the store was last told a pair answers without rate-limit headers."""
        self._task: asyncio.Task[None] | None = None
        self._used = asyncio.Event()
        """Set by every request that asks or tells the view (an idle `_run` sleeps on it)."""
        self._work = asyncio.Event()
        """Set when a statement waits to be written or published (a busy `_run` sleeps on
        it between refreshes)."""

    # -- the request path (no await) ------------------------------------------------------

    def watches(self, account_id: str, model: str) -> bool:
        """Whether admission asks the view: something is known of the pair, or it is probed."""
        return (account_id, model) in self._local or self.probing(account_id, model)

    def output_estimate(self, account_id: str, model: str) -> int | None:
        """The model's declared `output_estimate`, if any."""
        return self._defaults.get((account_id, model))

    def quota(self, account_id: str, model: str) -> Quota | None:
        return self._local.get((account_id, model))

    def admit(
        self, account_id: str, model: str, cost: Estimate, now: float, ref: str | None = None
    ) -> float | None:
        """None: the request fits what is known (and is spent from the view, and held in flight
        under `ref` until its answer); else epoch seconds when room is expected."""
        pair = (account_id, model)
        self._used.set()
        quota = self._local.get(pair)
        if quota is None:
            return self._probed(pair, cost, now, ref)
        when = room_at(quota, cost, now)
        if when is None:
            self._local[pair] = spent(quota, cost, now)
            if ref is not None:
                self._seq += 1
                self._in_flight.setdefault(pair, {})[ref] = _InFlight(self._seq, now, cost)
        return when

    def _probed(self, pair: Pair, cost: Estimate, now: float, ref: str | None) -> float | None:
        """Admission while nothing is known of the pair: `probe_requests` at a time until it
        answers, doubling every `PROBE_DOUBLING_S` its oldest request waits (past it: a
        short wait, or the next doubling), then anything."""
        if pair in self._heard_from or not self._probe or ref is None:
            return None
        held = self._in_flight.setdefault(pair, {})
        if held:
            oldest = next(iter(held.values())).admitted_at  # entries are kept in admission order
            doublings = max(0, int((now - oldest) // PROBE_DOUBLING_S))
            if len(held) >= self._probe << min(doublings, 30):
                return min(now + PROBE_RETRY_S, oldest + (doublings + 1) * PROBE_DOUBLING_S)
        self._seq += 1
        held[ref] = _InFlight(self._seq, now, cost)
        return None

    def probing(self, account_id: str, model: str) -> bool:
        """Whether the pair is still probed (nothing known of it, no answer yet)."""
        pair = (account_id, model)
        return self._probe > 0 and pair not in self._heard_from and pair not in self._local

    def in_flight(self, account_id: str, model: str) -> int:
        """How many admitted requests on the pair are still unanswered."""
        return len(self._in_flight.get((account_id, model), {}))

    def _settle(self, pair: Pair, ref: str | None) -> _InFlight | None:
        held = self._in_flight.get(pair)
        if held is None or ref is None:
            return None
        entry = held.pop(ref, None)
        if not held:
            del self._in_flight[pair]
        return entry

    def _behind(self, pair: Pair, seq: int) -> Estimate:
        """What the requests admitted after `seq` and still unanswered hold."""
        held = self._in_flight.get(pair, {})
        return total(entry.cost for entry in held.values() if entry.seq > seq)

    def answered(
        self,
        account_id: str,
        model: str,
        buckets: Mapping[QuotaDimension, Bucket],
        cost: Estimate | None,
        usage: Usage,
        now: float,
        ref: str | None = None,
        *,
        status: int = 200,
    ) -> None:
        """An answer came back: its headers replace the view (they count this request and
        those sent before it, not those sent after it and still in flight), unless the
        view already took the headers of a request sent later; without headers, the estimate
        is reconciled with the usage it reported."""
        pair = (account_id, model)
        self._used.set()
        held = self._local.get(pair)
        entry = self._settle(pair, ref)
        if _speaks(buckets, status):
            self._heard_from.add(pair)
        if buckets:
            seq = self._seq if entry is None else entry.seq
            if seq < self._taken_seq.get(pair, 0):
                return  # older than what the view holds: a later request's answer came first
            statement = self._take_headers(pair, held, buckets, seq, now)
            like = entry.cost if entry is not None else cost
            if room_at(statement, like or _NOTHING, now) is not None:
                self._announce(statement)
        elif cost is not None and held is not None:
            self._local[pair] = reconciled(held, cost, usage.input_tokens, usage.output_tokens, now)
        elif (
            held is None
            and status < 400
            and now - self._silent.get(pair, float("-inf")) >= SILENT_EVERY_S
        ):
            # answered, saying nothing of its quota: the mints' probe need not wait for it
            self._silent[pair] = now
            self._dirty.setdefault(pair, Quota(account_id, model, {}, "headers", now))
            self._work.set()

    def replied(
        self,
        account_id: str,
        model: str,
        buckets: Mapping[QuotaDimension, Bucket],
        status: int,
        now: float,
        ref: str | None = None,
    ) -> None:
        """A probed pair's answer headers arrived: the probe ends now, and the view takes what
        they state (its body, a stream, may take minutes; `answered` takes them again at its
        end). Nothing for a pair already heard from."""
        pair = (account_id, model)
        if pair in self._heard_from or not _speaks(buckets, status):
            return
        self._heard_from.add(pair)
        if buckets and pair not in self._local:
            entry = self._in_flight.get(pair, {}).get(ref or "")
            self._take_headers(pair, None, buckets, self._seq if entry is None else entry.seq, now)

    def _take_headers(
        self,
        pair: Pair,
        held: Quota | None,
        buckets: Mapping[QuotaDimension, Bucket],
        seq: int,
        now: float,
    ) -> Quota:
        """An answer's headers over what the view held, less what the requests admitted after
        `seq` (the answered one) and still in flight hold; written to the store behind the
        requests. Returns the statement as the provider made it."""
        account_id, model = pair
        self._taken_seq[pair] = seq
        statement = learned(held, account_id, model, buckets, now)
        self._dirty[pair] = statement
        self._work.set()
        behind = self._behind(pair, seq)
        self._local[pair] = learned_behind(held, account_id, model, buckets, behind, now)
        self._stated_at[pair] = now
        return statement

    def unanswered(self, account_id: str, model: str, ref: str | None = None) -> None:
        """A request sent upstream ended without an answer (the caller gone, the send failed):
        its estimate stays spent, and a probed pair stays probed."""
        self._settle((account_id, model), ref)

    def unsent(
        self, account_id: str, model: str, cost: Estimate, now: float, ref: str | None = None
    ) -> None:
        """A request admitted here never reached the upstream: its estimate goes back."""
        pair = (account_id, model)
        self._settle(pair, ref)
        if (held := self._local.get(pair)) is not None:
            self._local[pair] = returned(held, cost, now)

    def rate_limited(
        self,
        account_id: str,
        model: str,
        buckets: Mapping[QuotaDimension, Bucket],
        wait_s: float,
        now: float,
        ref: str | None = None,
    ) -> float:
        """A rate-limit 429: the pair takes nothing until the provider's wait (plus jitter) is
        over, here at once and on every proxy after the next flush. Returns that moment."""
        pair = (account_id, model)
        self._settle(pair, ref)
        until = now + hold_s(wait_s, self._rng())
        quota = rate_limit_hold(self._local.get(pair), account_id, model, buckets, until, now)
        self._local[pair] = self._dirty[pair] = quota
        self._work.set()
        self._stated_at[pair] = now
        self._announce(quota)
        return until

    def _announce(self, quota: Quota) -> None:
        """Publish this statement soon (the loop's next turn), with any others of the turn."""
        if self._bus is None:
            return
        self._news[(quota.account_id, quota.model)] = quota
        self._work.set()
        if self._publishing is None or self._publishing.done():
            with contextlib.suppress(RuntimeError):  # no loop running: the next flush sends it
                self._publishing = asyncio.get_running_loop().create_task(self._publish())

    # -- sharing, off the request path ----------------------------------------------------

    async def start(self) -> None:
        if self._bus is not None:
            self._bus.on_quota(self._heard)
        await self.refresh()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        if self._publishing is not None:
            await asyncio.gather(self._publishing, return_exceptions=True)
        await self.flush()

    async def _run(self) -> None:
        """A flush `flush_s` after a statement waits to be written (none while nothing
        does); a refresh every `refresh_s` while requests use the view, and every
        `IDLE_REFRESH_S` while none do (idle: no request since the last refresh, none in
        flight), and at once when one comes back (it is admitted on the view as it is; the
        news channel carries exhaustion at once)."""
        loop = asyncio.get_running_loop()
        refreshed = loop.time()  # `start` has just refreshed
        busy = False
        while True:
            self._work.clear()
            if self._dirty or self._news:
                await asyncio.sleep(self._flush_s)
                await self.flush()
            elif busy:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(refreshed + self._refresh_s - loop.time()):
                        await self._work.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(refreshed + IDLE_REFRESH_S - loop.time()):
                        await self._used.wait()
                busy = self._used.is_set()
            now = loop.time()
            if now - refreshed >= (self._refresh_s if busy else IDLE_REFRESH_S):
                busy = self._used.is_set() or bool(self._in_flight)
                self._used.clear()
                refreshed = now
                await self.refresh()

    async def _publish(self) -> None:
        while self._bus is not None and self._news:  # news heard while publishing goes next
            batch, self._news = self._news, {}
            try:
                await self._bus.publish_quota(list(batch.values()))
            except StoreError as exc:
                log.warning("quota news not published", extra={"error": exc.reason})
                return

    def _heard(self, quotas: Sequence[Quota]) -> None:
        """Quota news from another proxy: taken as a refresh takes the store's."""
        for quota in quotas:
            if (quota.account_id, quota.model) in self._known:
                self._take(quota)

    async def flush(self) -> None:
        """Write what this proxy learned since the last flush, in one batch (and publish any
        news left unpublished)."""
        await self._publish()
        self._drop_lost(self._clock.now().timestamp())
        if not self._dirty:
            return
        batch, self._dirty = self._dirty, {}
        try:
            await self.store.learn(list(batch.values()), self._clock.now().timestamp())
        except StoreError as exc:
            log.warning("quota not shared", extra={"error": exc.reason})
            for pair, quota in batch.items():
                self._dirty.setdefault(pair, quota)  # a newer one learned since wins

    async def refresh(self) -> None:
        """Take what the other proxies learned, where it is newer than what this one holds."""
        try:
            found = await self.store.snapshot(self._pairs, self._clock.now().timestamp())
        except StoreError as exc:
            log.warning("quota view not refreshed", extra={"error": exc.reason})
            return
        for quota in found.values():
            self._take(quota)

    def _take(self, quota: Quota) -> None:
        """Another proxy's statement, where it is newer than what this view holds, less what
        this proxy admitted after it was observed and is still in flight."""
        pair = (quota.account_id, quota.model)
        self._heard_from.add(pair)  # it has answered some proxy
        if not quota.buckets or quota.observed_at <= self._stated_at.get(pair, float("-inf")):
            return  # an empty statement (answers without headers) holds nothing here
        held = self._local.get(pair)
        mine = self._in_flight.get(pair, {}).values()
        behind = total(e.cost for e in mine if e.admitted_at > quota.observed_at)
        self._local[pair] = learned_behind(
            held, quota.account_id, quota.model, quota.buckets, behind, quota.observed_at
        )
        self._stated_at[pair] = quota.observed_at

    def _drop_lost(self, now: float) -> None:
        for pair, held in list(self._in_flight.items()):
            for ref, entry in list(held.items()):
                if now - entry.admitted_at > IN_FLIGHT_MAX_S:
                    del held[ref]
            if not held:
                del self._in_flight[pair]
