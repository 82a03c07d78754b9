"""Everything a proxy request needs, built once per process, and how a request ends."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from leasegate.accounts import Registry
from leasegate.config import Settings
from leasegate.core.clock import Clock
from leasegate.core.observation import Observation
from leasegate.core.ports.health import HealthTransition
from leasegate.kv.slot_keeper import SlotKeeper
from leasegate.proxy.attempt import Attempt
from leasegate.proxy.evidence import EvidenceSink
from leasegate.proxy.health_view import HealthView
from leasegate.proxy.keys import KeyResolver
from leasegate.proxy.metrics import ProxyMetrics
from leasegate.proxy.spend import SpendGate
from leasegate.routing.classify import classify
from leasegate.upstream.clients import UpstreamClients
from leasegate.web.errors import STORE_ERRORS
from leasegate.web.health_events import log_transitions

log = logging.getLogger("leasegate.proxy")


@dataclass
class ProxyRuntime:
    settings: Settings
    registry: Registry
    clock: Clock
    resolver: KeyResolver
    clients: UpstreamClients
    health: HealthView
    slots: SlotKeeper
    evidence: EvidenceSink
    metrics: ProxyMetrics
    spend: SpendGate

    async def release_slot(self, attempt: Attempt) -> None:
        """Give back the attempt's request slot, if it holds one. Safe to call repeatedly."""
        account_id, attempt.slot_account = attempt.slot_account, None
        if account_id is not None:
            await self.slots.release(account_id, attempt.request_id)

    async def finish(self, attempt: Attempt, observation: Observation) -> None:
        """The one way a request ends: slot back, health fed, one evidence row queued (a
        qualifying failure's row written before this returns). Only the first call counts."""
        if attempt.finished:
            await self.release_slot(attempt)
            return
        attempt.finished = True
        await self.release_slot(attempt)
        classification = classify(observation, attempt.errors)
        ended = self.clock.monotonic()
        cost = self.spend.cost(attempt.key, attempt.usage)
        row = attempt.evidence(observation, classification, ended, cost)
        if classification.qualifying:
            await self.evidence.add_durable(row)  # a hop may cite it as soon as the caller knows
        else:
            self.evidence.add(row)
        self.metrics.observe(row)
        key = attempt.key
        try:
            await self.spend.record(key, attempt.usage, cost)
        except STORE_ERRORS as exc:
            # the row (with its tokens and cost) is queued either way; the running total misses it
            log.error("spend record failed", extra={"error": type(exc).__name__})
        signal = classification.health_scope is not None or classification.resets_streak
        if key is None or not attempt.feeds_health or not signal:
            return
        try:
            transitions: list[HealthTransition] = await self.health.record(
                key.account_id,
                key.served_model,
                classification,
                observation.retry_after_s,
                self.clock.now().timestamp(),
                trial=attempt.health_trial,
            )
        except STORE_ERRORS as exc:
            # The row is queued either way; only this request's health signal is lost.
            log.error("health record failed", extra={"error": type(exc).__name__})
            return
        log_transitions(transitions)
        self.metrics.health_transitions(transitions)
