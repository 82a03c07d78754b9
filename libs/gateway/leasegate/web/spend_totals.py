"""Running spend totals that evidence can always rebuild: what both services ask of the spend
store, through one object.

- `spent(ref)`: the total. When the store does not know it (never started, or lost with
  Redis's data: a restart without persistence, a failover, a flush, a restarted embedded
  gateway) it is rebuilt *before* the answer is used to admit anything. A total that was lost
  has kept the requests finished since (per second of their start): the evidence rows started
  before a settled cut-off (`settle_s` ago, a whole second) plus those. A total never written
  has kept nothing: the evidence rows started before the admitted request. Several replicas
  may rebuild at once: the first rebase wins, the others read it (`only_if_unknown`); in one
  process concurrent rebuilds of one total share one evidence read.
- `reconcile(ref)`: brings a known total back to evidence: the rows started before a settled
  cut-off plus the requests counted since. Any drift (a lost add, a double count, an edit)
  older than the cut-off disappears.
- `add(ref, ...)`: a finished request, counted if it started at or after the cut-off.

The rules a store keeps are `leasegate.spend.totals.RunningTotal` (docs/spend.md).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.ports.spend import ChainSpend, SpendEvidence
from leasegate.spend import TenantBudget, period_start, seconds_left, tenant_total_id
from leasegate.spend.totals import evidence_total, reconcile_cutoff

log = logging.getLogger("leasegate.spend")

_DAY_S = 86_400.0
BUDGET_REFRESH_S = 1.0
"""A proxy learns a tenant budget set on the chain within this (`TenantBudgetWatch`)."""
SETTLE_MARGIN_S = 2.0
"""Added to the longest a row waits in the proxy's memory (`evidence_written_within_s`:
`LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S` + 2 x `LEASEGATE_EVIDENCE_LINGER_S`): by then a finished
request's row has been written (a database outage, or a request still running, is the
exception: counted by the next reconciliation after its row lands)."""


def settle_seconds(evidence_written_within_s: float) -> float:
    return evidence_written_within_s + SETTLE_MARGIN_S


@dataclass(frozen=True, slots=True)
class TotalRef:
    """One running total: a tenant's for a period (`tenant`, `since` = the period's start) or
    a dispatch chain's (`chain_id`: its rows since its first decision)."""

    total_id: str
    keep_s: float
    tenant: str | None = None
    chain_id: str | None = None
    since: datetime = datetime(1970, 1, 1, tzinfo=UTC)


def tenant_total(tenant: str, budget: TenantBudget, at: datetime) -> TotalRef:
    """The tenant's total for the period containing `at`, kept a day past the period's end
    (so a late reader still sees the final total)."""
    return TotalRef(
        tenant_total_id(tenant, budget.period, at),
        seconds_left(at, budget.period) + _DAY_S,
        tenant=tenant,
        since=period_start(at, budget.period),
    )


def chain_total(chain_id: str, keep_s: float) -> TotalRef:
    return TotalRef(chain_id, keep_s, chain_id=chain_id)


class SpendTotals:
    def __init__(
        self,
        store: ChainSpend,
        evidence: SpendEvidence,
        registry: Registry,
        clock: Clock,
        settle_s: float,
    ) -> None:
        self._store = store
        self._evidence = evidence
        self._includes_cache = {a.id: a.input_includes_cache for a in registry.accounts}
        self._clock = clock
        self.settle_s = settle_s
        self._rebuilding: dict[str, asyncio.Future[tuple[int, int]]] = {}

    @property
    def store(self) -> ChainSpend:
        return self._store

    async def spent(self, ref: TotalRef, as_of: datetime | None = None) -> tuple[int, int]:
        """(tokens, cost in billionths), rebuilt first when unknown. `as_of`: the start of the
        request being admitted (now if None), the earliest a fresh total may count from."""
        held = await self._store.spent(ref.total_id)
        if held is not None:
            return held
        return await self._rebuild(ref, as_of or self._clock.now())

    async def add(self, ref: TotalRef, tokens: int, cost: int, started_at: datetime) -> None:
        await self._store.add(ref.total_id, tokens, cost, started_at.timestamp(), ref.keep_s)

    async def reconcile(self, ref: TotalRef) -> tuple[int, int]:
        """The total brought back to evidence up to a settled cut-off; rebuilt if unknown."""
        if await self._store.spent(ref.total_id) is None:
            return await self._rebuild(ref, self._clock.now())
        cutoff = reconcile_cutoff(self._clock.now().timestamp(), self.settle_s)
        tokens, cost = await self._from_evidence(ref, datetime.fromtimestamp(cutoff, UTC))
        return await self._store.rebase(
            ref.total_id, cutoff, tokens, cost, ref.keep_s, only_if_unknown=False
        )

    async def _rebuild(self, ref: TotalRef, as_of: datetime) -> tuple[int, int]:
        pending = self._rebuilding.get(ref.total_id)
        if pending is None:
            pending = asyncio.ensure_future(self._rebuild_now(ref, as_of))
            self._rebuilding[ref.total_id] = pending
            pending.add_done_callback(lambda _: self._rebuilding.pop(ref.total_id, None))
        return await asyncio.shield(pending)

    async def _rebuild_now(self, ref: TotalRef, as_of: datetime) -> tuple[int, int]:
        # A total lost with the store's data has kept the requests since (per second): the
        # evidence is asked only up to a settled cut-off. A total never written has kept
        # nothing: the evidence up to the admitted request's start, whatever is written.
        lost = await self._store.kept(ref.total_id)
        if lost:
            cutoff = reconcile_cutoff(self._clock.now().timestamp(), self.settle_s)
            until = datetime.fromtimestamp(cutoff, UTC)
        else:
            cutoff, until = as_of.timestamp(), as_of
        tokens, cost = await self._from_evidence(ref, until)
        total = await self._store.rebase(
            ref.total_id, cutoff, tokens, cost, ref.keep_s, only_if_unknown=True
        )
        # a total first used (a new dispatch, a new period) is routine; a lost one is not
        log.log(
            logging.WARNING if lost else logging.DEBUG,
            "spend total rebuilt from evidence" if lost else "spend total started from evidence",
            extra={"total": ref.total_id, "tokens": total[0], "cost_billionths": total[1]},
        )
        return total

    async def _from_evidence(self, ref: TotalRef, until: datetime) -> tuple[int, int]:
        groups = await self._evidence.spend_evidence(
            tenant=ref.tenant, chain_id=ref.chain_id, since=ref.since, until=until
        )
        return evidence_total(groups, self._includes_cache)
