"""Everything a proxy request needs, built once per process, and how a request ends."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from leasegate.accounts import Registry
from leasegate.config import Settings
from leasegate.core.clock import Clock
from leasegate.core.observation import Classification
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import HealthTransition
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.kv.slot_keeper import SlotKeeper
from leasegate.proxy.evidence import EvidenceSink
from leasegate.proxy.health_view import HealthView
from leasegate.proxy.keys import KeyResolver
from leasegate.proxy.metrics import ProxyMetrics
from leasegate.proxy.quota_view import QuotaView
from leasegate.proxy.request import Admission, Ended, evidence_row
from leasegate.proxy.spend import SpendGate
from leasegate.routing.classify import classify
from leasegate.routing.quota import RATE_LIMIT_WAIT_S
from leasegate.upstream.clients import UpstreamClients
from leasegate.web.health_events import log_transitions

if TYPE_CHECKING:
    from leasegate.proxy.spans import RequestTrace, RequestTracer

log = logging.getLogger("leasegate.proxy")

Answer = Callable[[float | None], Awaitable[None]]
"""Sends the caller its answer, given the pair's rate-limit hold (epoch seconds; None: none)."""

Recorded = tuple[EvidenceRow, float | None]
"""An ended request's row, and the pair's rate-limit hold if its answer set one."""


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

    async def finish(
        self, admission: Admission, ended: Ended, answer: Answer | None = None
    ) -> None:
        """The one way a request ends, called once per request: its request slot back, its
        observation classified (here and nowhere else), one evidence row queued, metrics, the
        quota view, spend and health fed. `answer` (a buffered relay's) sends the caller its
        answer, given the pair's rate-limit hold (epoch seconds; None: none): a qualifying
        failure's row is written (and the view told of a rate limit) before it runs, so a hop
        may cite the row as soon as the caller knows; any other row is queued after it. The
        recording is shielded from cancellation (a client gone, a shutdown)."""
        classification = classify(ended.observation, admission.errors)
        if answer is not None and not classification.qualifying:
            await self._answer_first(admission, ended, classification, answer)
            return
        with anyio.CancelScope(shield=True):
            _, hold = await self._end(admission, ended, classification)
        if answer is not None:
            await answer(hold)

    async def _answer_first(
        self, admission: Admission, ended: Ended, classification: Classification, answer: Answer
    ) -> None:
        if (account_id := admission.slot) is not None:
            # back before the caller has its answer, so its next request finds the slot free
            with anyio.CancelScope(shield=True):
                await self.slots.release(account_id, admission.request_id)
            admission = replace(admission, slot=None)
        try:
            await answer(None)
        finally:
            with anyio.CancelScope(shield=True):
                await self._end(admission, ended, classification)

    def _end(
        self, admission: Admission, ended: Ended, classification: Classification
    ) -> Awaitable[Recorded]:
        """Record the ended request: its row, and the pair's rate-limit hold if it set one. (A
        plain function handing back the right coroutine: an untraced request pays no extra
        frame for tracing.)"""
        if admission.trace is None:
            return self._record(admission, ended, classification)
        return self._record_traced(admission.trace, admission, ended, classification)

    async def _record_traced(
        self,
        trace: RequestTrace,
        admission: Admission,
        ended: Ended,
        classification: Classification,
    ) -> Recorded:
        with trace.step("proxy.finish"):
            recorded = await self._record(admission, ended, classification)
        trace.end(recorded[0])
        return recorded

    def _learn_quota(
        self, admission: Admission, ended: Ended, key: KeyRecord, classification: Classification
    ) -> float | None:
        """What the answer said of the pair's quota, into the local view (no store call);
        returns the pair's hold when the answer was a rate limit."""
        account_id, model = key.account_id, key.served_model
        observation, cost = ended.observation, admission.quota_cost
        now = self.clock.now().timestamp()
        if classification.rate_limited:
            wait = observation.rate_limit_wait_s
            return self.quota.rate_limited(
                account_id,
                model,
                ended.quota_buckets,
                RATE_LIMIT_WAIT_S if wait is None else min(wait, self.settings.max_cooldown_s),
                now,
                admission.request_id,
            )
        if ended.status is None:  # no answer: nothing learned of the pair
            if cost is not None and observation.kind == "refused":
                self.quota.unsent(account_id, model, cost, now, admission.request_id)
            elif cost is not None:  # gone without an answer: its estimate stays spent
                self.quota.unanswered(account_id, model, admission.request_id)
            return None
        self.quota.answered(
            account_id,
            model,
            ended.quota_buckets,
            cost,
            ended.usage,
            now,
            admission.request_id,
            status=ended.status,
        )
        return None

    async def _record(
        self,
        admission: Admission,
        ended: Ended,
        classification: Classification,
    ) -> Recorded:
        key, usage, trace = admission.key, ended.usage, admission.trace
        if (account_id := admission.slot) is not None:
            await self.slots.release(account_id, admission.request_id)
        cost = self.spend.cost(key, usage)
        row = evidence_row(admission, ended, classification, self.clock.monotonic(), cost)
        if classification.citable:
            await self.evidence.add_durable(row)  # a hop may cite it as soon as the caller knows
        else:
            self.evidence.add(row)
        if trace is not None:
            trace.evidence(durable=classification.citable)
        self.metrics.observe(row)
        hold = None
        if key is not None:
            hold = self._learn_quota(admission, ended, key, classification)
        try:
            await self.spend.record(key, usage, cost, admission.started_at)
        except StoreError as exc:
            # the row (with its tokens and cost) is queued either way; the running total misses it
            log.error("spend record failed", extra={"error": exc.reason})
        signal = classification.health_scope is not None or classification.resets_streak
        if key is not None and admission.endpoint.completion and signal:
            await self._record_health(admission, ended, key, classification)
        return row, hold

    async def _record_health(
        self, admission: Admission, ended: Ended, key: KeyRecord, classification: Classification
    ) -> None:
        """Health is fed by a completion endpoint's requests only (see Endpoint.completion)."""
        try:
            transitions: list[HealthTransition] = await self.health.record(
                key.account_id,
                key.served_model,
                classification,
                ended.observation.retry_after_s,
                self.clock.now().timestamp(),
                trial=admission.trial,
            )
        except StoreError as exc:
            # The row is queued either way; only this request's health signal is lost.
            log.error("health record failed", extra={"error": exc.reason})
            return
        log_transitions(transitions)
        self.metrics.health_transitions(transitions)
