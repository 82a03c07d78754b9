"""Which tenants have a budget, as every proxy replica learns it: from the audit chain in the
database, verified like the control plane's overlay (anchor, audit key and the witness in
Redis), at most `REFRESH_S` old.

A request of any tenant asks `budget_of(tenant)`. While the last read is younger than
`FRESH_S` it is answered from memory; between `FRESH_S` and `REFRESH_S` a read is started in
the background and the current answer used; past `REFRESH_S` (or before the first read) the
request waits for the read, which every concurrent request shares. A read is the chain's head
(one short transaction); the chain itself is read and folded only when the head moved. So a
budget set on the control plane is enforced by every replica within `REFRESH_S`.

Budgets fail closed. Until this process has verified the chain once, it cannot say which
tenants are budgeted, so it clears none: `budget_of` raises 503 `budgets-unverifiable` for
every tenant (a chain that reads corrupt or `behind-witness`, or a database that cannot be
read, at start-up). Once it has verified the chain, a later read that does not verify (or
fails) keeps the last verified budgets: tenants budgeted there stay metered against them, and
the others are cleared, because the control plane appends no budget change to a chain that
does not verify. The reason is logged once when it starts and once when it ends, never per
request. After a failed read no request waits for the next one (it runs in the background
every `FRESH_S`) until a read succeeds again: a database outage must not slow every request
down while the proxy still serves from its key cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from pydantic import SecretStr

from leasegate.audit import ChainVerdict, fold
from leasegate.audit.reads import ChainHead, ChainReader
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.errors import StoreError, failure_reason
from leasegate.core.ports.witness import AuditWitness, Witness
from leasegate.spend import TenantBudget
from leasegate.web.spend_totals import BUDGET_REFRESH_S

log = logging.getLogger("leasegate.proxy")

FRESH_S = 0.5
REFRESH_S = BUDGET_REFRESH_S
READ_DEADLINE_S = 2.0


class TenantBudgetWatch:
    def __init__(
        self,
        repository: ChainReader,
        audit_key: SecretStr | None,
        clock: Clock,
        witness: AuditWitness | None = None,
    ) -> None:
        self._repository = repository
        self._key = audit_key.get_secret_value().encode() if audit_key is not None else None
        self._clock = clock
        self._witness = witness
        self._budgets: Mapping[str, TenantBudget] = {}
        self._verified = False
        """Whether `_budgets` come from a chain this process verified."""
        self._head: ChainHead | None = None
        self._read_at: float | None = None
        self._pending: asyncio.Task[None] | None = None
        self._reads_ok = True
        """Whether the last read succeeded: only then does a stale answer wait for a read."""
        self._trouble: str | None = None
        """Why the last read did not verify, logged once when it changes."""

    @property
    def verified(self) -> bool:
        return self._verified

    async def budget_of(self, tenant: str) -> TenantBudget | None:
        """The tenant's budget, None when it has none; 503 `budgets-unverifiable` while this
        process has never verified the chain (it cannot clear any tenant)."""
        budgets = await self.budgets()
        if not self._verified:
            raise GatewayError(
                "budgets-unverifiable",
                "this proxy cannot verify the tenant budgets it must enforce",
                retry_after_s=REFRESH_S,
            )
        return budgets.get(tenant)

    async def budgets(self) -> Mapping[str, TenantBudget]:
        """The last verified budgets (empty while none were ever verified)."""
        read_at = self._read_at
        age = None if read_at is None else self._clock.monotonic() - read_at
        if age is not None and age < FRESH_S:
            return self._budgets
        pending = self._pending
        if pending is None:
            pending = self._pending = asyncio.ensure_future(self._refresh())
            pending.add_done_callback(self._settled)
        if self._reads_ok and (age is None or age >= REFRESH_S):
            await asyncio.shield(pending)
        return self._budgets

    def _settled(self, done: asyncio.Task[None]) -> None:
        if self._pending is done:
            self._pending = None

    async def _refresh(self) -> None:
        started = self._clock.monotonic()
        try:
            async with asyncio.timeout(READ_DEADLINE_S):
                head = await self._repository.read_head()
                if head != self._head:
                    # the witness first: it moves only after an append commits, so read before
                    # the chain it is never ahead of it (an older reading is weaker, not wrong)
                    witness = await self._read_witness()
                    snapshot = await self._repository.read_chain()
                    self._accept(
                        fold(snapshot.records, snapshot.anchor, key=self._key, witness=witness),
                        head,
                    )
        except (StoreError, TimeoutError) as exc:  # TimeoutError: the deadline above
            self._troubled(f"unreadable: {failure_reason(exc)}")
            self._reads_ok = False
            # retried in the background FRESH_S from now, not by every request
            self._read_at = self._clock.monotonic()
            return
        self._reads_ok = True
        self._read_at = started

    async def _read_witness(self) -> Witness | None:
        """Without a readable witness the chain is verified without it, as the control
        plane's overlay does (docs/audit.md); Redis being out is refused elsewhere."""
        if self._witness is None:
            return None
        try:
            return await self._witness.read()
        except StoreError as exc:
            log.warning("audit witness unreadable", extra={"error": failure_reason(exc)})
            return None

    def _accept(self, verdict: ChainVerdict, head: ChainHead) -> None:
        if verdict.status == "corrupt":
            self._troubled(f"corrupt: {verdict.problem} at seq {verdict.first_bad_seq}")
            return
        self._budgets = dict(verdict.budgets)
        self._verified = True
        self._head = head
        if self._trouble is not None:
            log.warning("tenant budgets verified again", extra={"was": self._trouble})
            self._trouble = None

    def _troubled(self, why: str) -> None:
        if why == self._trouble:
            return
        self._trouble = why
        if self._verified:
            log.error("tenant budgets: keeping the last verified ones", extra={"chain": why})
        else:
            log.error(
                "tenant budgets unverifiable: refusing every tenant until the chain verifies",
                extra={"chain": why},
            )
