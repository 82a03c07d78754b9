"""Running spend totals brought back to evidence, by every control plane in the background.

Every `LEASEGATE_SPEND_RECONCILE_INTERVAL_S` (60 s) each budgeted tenant's total for the
current period and each budgeted dispatch chain with a live key is rebased on the evidence
rows started before a settled cut-off (`SpendTotals.reconcile`): a lost add, a Redis that
lost its data, a double count or an injected edit older than the cut-off is gone after one
interval. Rebases are idempotent and only move a cut-off forward, so any number of control
planes may run this side by side.

A budget that is set (or changed) is reconciled twice more shortly after: once every proxy
has learnt it (`BUDGET_REFRESH_S`) and the rows of the requests they served meanwhile have been
written, the total counts them too; nothing in between is left uncounted. The second round, as
long again after, covers a proxy that learnt the budget late.
"""

from __future__ import annotations

import asyncio
import logging

from leasegate.control_plane.deps import OverlayReads
from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.spend import BudgetedChains
from leasegate.core.tasks import stop_task
from leasegate.web.spend_totals import (
    BUDGET_REFRESH_S,
    SpendTotals,
    TotalRef,
    chain_total,
    tenant_total,
)

log = logging.getLogger("leasegate.spend")

RETRY_S = 5.0
SETTLE_ROUNDS = 2


class SpendReconciler:
    def __init__(
        self,
        overlay: OverlayReads,
        totals: SpendTotals,
        chains: BudgetedChains,
        clock: Clock,
        *,
        every_s: float,
        chain_keep_s: float,
    ) -> None:
        self._overlay = overlay
        self._totals = totals
        self._chains = chains
        self._clock = clock
        self._every_s = every_s
        self._chain_keep_s = chain_keep_s
        self._task: asyncio.Task[None] | None = None
        self._settling: set[asyncio.Task[None]] = set()

    async def run_once(self) -> int:
        """Reconcile every total that matters now; how many moved."""
        now = self._clock.now()
        verdict = await self._overlay.verdict()
        refs = [tenant_total(t, b, now) for t, b in sorted(verdict.budgets.items())]
        refs += [
            chain_total(c, self._chain_keep_s) for c in await self._chains.budgeted_live_chains(now)
        ]
        moved = 0
        for ref in refs:
            moved += await self._reconcile(ref)
        return moved

    async def budget_set(self, tenant: str) -> None:
        """After a budget change: the total now (rebuilt from evidence if unknown), and once
        more when every proxy knows the budget and their rows are written."""
        budget = (await self._overlay.verdict()).budgets.get(tenant)
        if budget is None:
            return
        ref = tenant_total(tenant, budget, self._clock.now())
        await self._totals.spent(ref)
        task = asyncio.create_task(self._settle(ref))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _settle(self, ref: TotalRef) -> None:
        """Twice: when every proxy should know the budget, and once more as long again after,
        for a proxy that learnt it late (a busy host): rebases are idempotent."""
        delay = BUDGET_REFRESH_S + self._totals.settle_s + 1.0
        for _ in range(SETTLE_ROUNDS):
            await asyncio.sleep(delay)
            try:
                await self._reconcile(ref)
            except StoreError as exc:
                log.warning("spend total not settled", extra={"error": exc.reason})

    async def _reconcile(self, ref: TotalRef) -> int:
        before = await self._totals.store.spent(ref.total_id)
        after = await self._totals.reconcile(ref)
        if before == after:
            return 0
        log.info(
            "spend total reconciled with evidence",
            extra={"total": ref.total_id, "before": before, "after": after},
        )
        return 1

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        await asyncio.gather(*(stop_task(t) for t in (self._task, *self._settling)))
        self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            try:
                await self.run_once()
            except StoreError as exc:
                log.warning("spend reconciliation failed", extra={"error": exc.reason})
                await asyncio.sleep(RETRY_S)
