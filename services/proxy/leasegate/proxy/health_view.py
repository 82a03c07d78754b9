"""The proxy's process-local view of health: no store round trip for a healthy pair.

The health store stays the one authority (every failure is counted there, atomically across
processes). This view only decides when the store must be asked. It remembers, per pair and
per account circuit, what is known to be not clean:

    watched[key] = 0.0          a failure streak may be running (a failure was recorded here
                                or elsewhere): the next success must reset it in the store
    watched[key] = until > 0    a cooldown was opened (until then) or may be: requests ask the
                                store to admit them (the exact rule, half-open trials
                                included) before going upstream
    watched[key] = inf          unknown (start-up, or the subscription just (re)connected):
                                ask the store until it has been read

A key not in the view is clean: a request on it asks nothing before going upstream, and its
success writes nothing after. A failure is recorded in the store as ever, then published to
every proxy (`HealthFanout`), so a cooldown opened anywhere is refused everywhere as soon as
the news arrives. A success on a watched key is recorded once, which resets the streak in the
store; the key leaves the view when no cooldown is left on it. Between a failure elsewhere and
its news arriving (one pub/sub delivery), a success here does not reset that streak. While the
subscription is down every request asks the store, as before this view existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.observation import Classification
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import (
    Admitted,
    Cooldown,
    HealthFanout,
    HealthNews,
    HealthStore,
    HealthTransition,
)
from leasegate.core.tasks import stop_task

log = logging.getLogger("leasegate.proxy")

Key = tuple[str, str | None]
"""(account_id, served model); model None: the account circuit."""

_ADMITTED = Admitted()


class HealthView:
    def __init__(
        self, store: HealthStore, fanout: HealthFanout, registry: Registry, clock: Clock
    ) -> None:
        self.store = store
        self._clock = clock
        self._fanout = fanout
        self._pairs = [
            (account.id, model)
            for account in registry.accounts
            for model in dict.fromkeys(account.models.values())
        ]
        self._watched: dict[Key, float] = {}
        self._refresh: asyncio.Task[None] | None = None
        self._heard: dict[Key, float] = {}
        """News that arrived while the store was being re-read (applied after it)."""
        self._mark_unknown()

    async def start(self) -> None:
        """Subscribe to the news; returns once the store has been read, or at once when the
        subscription is not live yet (then every request asks the store until it is)."""
        await self._fanout.subscribe(self._on_news, self._on_reset)
        if self._refresh is not None:
            await asyncio.shield(self._refresh)

    async def stop(self) -> None:
        await self._fanout.aclose()
        with contextlib.suppress(Exception):  # a failed refresh has been logged
            await stop_task(self._refresh)

    def watched(self, account_id: str, model: str | None) -> float | None:
        """What the view holds for a key (None: clean), for tests and diagnostics."""
        return self._watched.get((account_id, model))

    async def admit(self, account_id: str, model: str, now: float) -> Admitted | Cooldown:
        """`HealthStore.admit`, answered here without a round trip when the pair and its
        circuit are clean or only a streak may run on them (no cooldown, no trial to claim)."""
        if not self._fanout.trusted() and not await self._fanout.confirmed():
            return await self.store.admit(account_id, model, now)
        # the view is read after any wait: news (or a reset) delivered ahead of the heartbeat's
        # answer applies to this request
        watched = self._watched
        if watched and (
            watched.get((account_id, None), 0.0) or watched.get((account_id, model), 0.0)
        ):
            return await self.store.admit(account_id, model, now)
        return _ADMITTED

    async def record(
        self,
        account_id: str,
        model: str,
        classification: Classification,
        retry_after_s: float | None,
        now: float,
        *,
        trial: Admitted | None = None,
    ) -> list[HealthTransition]:
        """`HealthStore.record`, skipped for a success on clean keys (a trial is never
        clean: it was admitted by the store on a watched key)."""
        pair, circuit = (account_id, model), (account_id, None)
        watched = self._watched
        if classification.resets_streak:
            if trial is None and pair not in watched and circuit not in watched:
                return []
            transitions = await self.store.record(
                account_id, model, classification, retry_after_s, now, trial=trial
            )
            for key in (pair, circuit):
                if watched.get(key, 0.0) <= now:  # no cooldown left on it
                    watched.pop(key, None)
            return transitions
        scope = classification.health_scope
        if scope is None:
            if trial is not None:  # a trial must report back whatever its outcome
                return await self.store.record(
                    account_id, model, classification, retry_after_s, now, trial=trial
                )
            return []
        transitions = await self.store.record(
            account_id, model, classification, retry_after_s, now, trial=trial
        )
        key = pair if scope == "model" else circuit
        until = max(
            (t.until for t in transitions if t.until is not None and t.model == key[1]),
            default=0.0,
        )
        news = HealthNews(account_id, key[1], until)
        self._learn(news)
        try:
            await self._fanout.publish([news])
        except StoreError as exc:
            log.error("health news not published", extra={"error": exc.reason})
        return transitions

    def _learn(self, news: HealthNews) -> None:
        key = (news.account_id, news.model)
        self._watched[key] = max(self._watched.get(key, 0.0), news.until)
        if self._refresh is not None and not self._refresh.done():
            self._heard[key] = max(self._heard.get(key, 0.0), news.until)

    def _on_news(self, news: Sequence[HealthNews]) -> None:
        for item in news:
            self._learn(item)

    def _mark_unknown(self) -> None:
        for account_id, model in self._pairs:
            self._watched[(account_id, model)] = math.inf
            self._watched[(account_id, None)] = math.inf

    def _on_reset(self) -> None:
        # News may have been missed: nothing is vouched for until the store has been read.
        self._mark_unknown()
        if self._refresh is None or self._refresh.done():
            self._heard.clear()
            self._refresh = asyncio.create_task(self._reread())

    async def _reread(self) -> None:
        """Replace the unknowns with what the store holds: cooldowns keep their end, the rest
        may carry a streak (0.0) until their next success resets it."""
        try:
            snapshot = await self.store.snapshot(self._pairs, self._clock.now().timestamp())
        except StoreError as exc:
            log.error("health view not refreshed", extra={"error": exc.reason})
            return  # the unknowns stay: every request asks the store until the next reset
        for key, until in list(self._watched.items()):
            if until == math.inf:
                self._watched[key] = 0.0
        for account_id, cooldown in snapshot.circuits.items():
            self._watched[(account_id, None)] = cooldown.until
        for (account_id, model), cooldown in snapshot.cooling.items():
            self._watched[(account_id, model)] = cooldown.until
        # news newer than the snapshot may be missing from it
        for key, until in self._heard.items():
            self._watched[key] = max(self._watched.get(key, 0.0), until)
        self._heard.clear()
