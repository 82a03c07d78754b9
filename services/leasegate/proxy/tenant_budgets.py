"""Which tenants have a budget, as every proxy replica learns it: from the audit chain in the
database, verified like the control plane's overlay, at most `REFRESH_S` old.

A request of any tenant asks `budgets()`. While the last read is younger than `FRESH_S` it is
answered from memory; between `FRESH_S` and `REFRESH_S` a read is started in the background
and the current answer used; past `REFRESH_S` (or before the first read) the request waits
for the read, which every concurrent request shares. A read is the chain's head (one short
transaction); the chain itself is read and folded only when the head moved. So a budget set
on the control plane is enforced by every replica within `REFRESH_S`.

A chain that does not verify, or a database that cannot be read, keeps the last verified
budgets (logged): nothing newer can be vouched for, and dropping budgets would fail open.
After a failed read no request waits for the next one (it runs in the background every
`FRESH_S`) until a read succeeds again: a database outage must not slow every request down
while the proxy still serves from its key cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from pydantic import SecretStr

from leasegate.audit import ChainVerdict, fold
from leasegate.audit.reads import ChainHead, ChainReader
from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError, failure_reason
from leasegate.spend import TenantBudget

log = logging.getLogger("leasegate.proxy")

FRESH_S = 0.5
REFRESH_S = 1.0
READ_DEADLINE_S = 2.0


class TenantBudgetWatch:
    def __init__(self, repository: ChainReader, audit_key: SecretStr | None, clock: Clock) -> None:
        self._repository = repository
        self._key = audit_key.get_secret_value().encode() if audit_key is not None else None
        self._clock = clock
        self._budgets: Mapping[str, TenantBudget] = {}
        self._head: ChainHead | None = None
        self._read_at: float | None = None
        self._pending: asyncio.Task[None] | None = None
        self._reads_ok = True
        """Whether the last read succeeded: only then does a stale answer wait for a read."""

    async def budgets(self) -> Mapping[str, TenantBudget]:
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
                    snapshot = await self._repository.read_chain()
                    self._accept(fold(snapshot.records, snapshot.anchor, key=self._key), head)
        except (StoreError, TimeoutError) as exc:  # TimeoutError: the deadline above
            log.warning("tenant budgets not refreshed", extra={"error": failure_reason(exc)})
            self._reads_ok = False
            # retried in the background FRESH_S from now, not by every request
            self._read_at = self._clock.monotonic()
            return
        self._reads_ok = True
        self._read_at = started

    def _accept(self, verdict: ChainVerdict, head: ChainHead) -> None:
        if verdict.status == "corrupt":
            log.error(
                "audit chain corrupt: keeping the last verified tenant budgets",
                extra={"first_bad_seq": verdict.first_bad_seq, "problem": verdict.problem},
            )
            return
        self._budgets = dict(verdict.budgets)
        self._head = head
