"""Everything a proxy request needs, built once per process, and how a request ends."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from leasegate.accounts import Registry
from leasegate.config import Settings
from leasegate.core.clock import Clock
from leasegate.core.observation import Classification, Observation
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import HealthTransition
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.kv.slot_keeper import SlotKeeper
from leasegate.proxy.attempt import Attempt
from leasegate.proxy.evidence import EvidenceSink
from leasegate.proxy.health_view import HealthView
from leasegate.proxy.keys import KeyResolver
from leasegate.proxy.metrics import ProxyMetrics
from leasegate.proxy.quota_view import QuotaView
from leasegate.proxy.spend import SpendGate
from leasegate.routing.classify import classify
from leasegate.routing.quota import RATE_LIMIT_WAIT_S
from leasegate.upstream.clients import UpstreamClients
from leasegate.web.health_events import log_transitions

if TYPE_CHECKING:
    from leasegate.proxy.spans import RequestTrace, RequestTracer

log = logging.getLogger("leasegate.proxy")


class InFlight:
    """Proxied requests this process works on, from arrival to the answer's last byte, and the
    bound past which new ones are shed (`LEASEGATE_MAX_IN_FLIGHT`; 0: none)."""

    __slots__ = ("count", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def enter(self) -> bool:
        """Counts the request in; False (not counted) when the process is at its bound."""
        if self.limit and self.count >= self.limit:
            return False
        self.count += 1
        return True

    def leave(self) -> None:
        self.count -= 1


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
    quota: QuotaView
    tracer: RequestTracer | None = None
    """Set at wiring when tracing is on; None: no request makes a span."""
    in_flight: InFlight = field(default_factory=lambda: InFlight(0))

    async def release_slot(self, attempt: Attempt) -> None:
        """Give back the attempt's request slot, if it holds one. Safe to call repeatedly."""
        account_id, attempt.slot_account = attempt.slot_account, None
        if account_id is not None:
            await self.slots.release(account_id, attempt.request_id)

    def finish(self, attempt: Attempt, observation: Observation) -> Awaitable[object]:
        """The one way a request ends: slot back, health fed, one evidence row queued (a
        qualifying failure's row written before this returns). Only the first call counts.
        Await it. (A plain function handing back the right coroutine: an untraced request
        pays no extra frame for tracing.)"""
        if attempt.finished:
            return self.release_slot(attempt)
        attempt.finished = True
        if attempt.trace is None:
            return self._end(attempt, observation)
        return self._end_traced(attempt.trace, attempt, observation)

    async def _end_traced(
        self, trace: RequestTrace, attempt: Attempt, observation: Observation
    ) -> None:
        with trace.step("proxy.finish"):
            row = await self._end(attempt, observation)
        trace.end(row)

    def _learn_quota(
        self,
        attempt: Attempt,
        key: KeyRecord,
        observation: Observation,
        classification: Classification,
    ) -> None:
        """What the answer said of the pair's quota, into the local view (no store call)."""
        account_id, model = key.account_id, key.served_model
        now = self.clock.now().timestamp()
        if classification.rate_limited:
            wait = observation.rate_limit_wait_s
            attempt.quota_hold_until = self.quota.rate_limited(
                account_id,
                model,
                attempt.quota_buckets,
                RATE_LIMIT_WAIT_S if wait is None else min(wait, self.settings.max_cooldown_s),
                now,
                attempt.request_id,
            )
        elif (
            attempt.upstream_status is None
            and attempt.quota_cost is not None
            and observation.kind == "refused"
        ):
            self.quota.unsent(account_id, model, attempt.quota_cost, now, attempt.request_id)
        else:  # answered, or gone without an answer (its estimate stays spent)
            self.quota.answered(
                account_id,
                model,
                attempt.quota_buckets,
                attempt.quota_cost,
                attempt.usage,
                now,
                attempt.request_id,
            )

    async def _end(self, attempt: Attempt, observation: Observation) -> EvidenceRow:
        await self.release_slot(attempt)
        classification = classify(observation, attempt.errors)
        ended = self.clock.monotonic()
        cost = self.spend.cost(attempt.key, attempt.usage)
        row = attempt.evidence(observation, classification, ended, cost)
        if classification.qualifying:
            await self.evidence.add_durable(row)  # a hop may cite it as soon as the caller knows
        else:
            self.evidence.add(row)
        if attempt.trace is not None:
            attempt.trace.evidence(durable=classification.qualifying)
        self.metrics.observe(row)
        key = attempt.key
        if key is not None:
            self._learn_quota(attempt, key, observation, classification)
        try:
            await self.spend.record(key, attempt.usage, cost, attempt.started_at)
        except StoreError as exc:
            # the row (with its tokens and cost) is queued either way; the running total misses it
            log.error("spend record failed", extra={"error": exc.reason})
        signal = classification.health_scope is not None or classification.resets_streak
        if key is None or not attempt.feeds_health or not signal:
            return row
        try:
            transitions: list[HealthTransition] = await self.health.record(
                key.account_id,
                key.served_model,
                classification,
                observation.retry_after_s,
                self.clock.now().timestamp(),
                trial=attempt.health_trial,
            )
        except StoreError as exc:
            # The row is queued either way; only this request's health signal is lost.
            log.error("health record failed", extra={"error": exc.reason})
            return row
        log_transitions(transitions)
        self.metrics.health_transitions(transitions)
        return row
