"""The admin overlay: folded from the audit chain, verified on every fold, never trusted.

Reads are served from a cache keyed on the chain's head (count, last hash, anchor) and the
witness, and at most `MAX_CACHE_AGE_S` old: an append, a deleted record, a touched anchor or a
rollback to an older head (the witness has moved on) misses the cache at once; an in-place
edit of an older record is caught by the next full fold, within that age. A mutation never
uses the cache: it re-reads and re-verifies the chain under the database lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import SecretStr

from leasegate.audit import (
    TENANT_BUDGET,
    AuditRecord,
    BudgetFields,
    ChainVerdict,
    Entry,
    corrupt_error,
    extend,
    fold,
)
from leasegate.audit.appends import AppendPlan, AuditChain, ChainRaced
from leasegate.audit.reads import ChainHead, ChainSnapshot
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.errors import StoreError, failure_reason
from leasegate.core.ports.witness import AuditWitness, Witness
from leasegate.core.records import KeyRecord

log = logging.getLogger("leasegate.audit")

MAX_CACHE_AGE_S = 5.0
REPORT_DEADLINE_S = 2.5
"""/readyz waits this long for the chain's state, then reports it `unknown`."""
AUTHENTICATED_BY = "admin-token"

_CacheKey = tuple[ChainHead, Witness | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditedChange:
    """What every change to the audit chain carries: who asks, why, and at which revision."""

    expected_revision: int
    reason: str
    actor: str
    """The admin token's configured name, never a string from the body."""
    on_behalf_of: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StateChange(AuditedChange):
    """Enable, disable or drain an account."""

    account_id: str
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetChange(AuditedChange):
    """Set (or, with no period and no bounds, clear) a tenant's budget per period."""

    budget: BudgetFields


Change = StateChange | BudgetChange


def entry_of(change: Change, now: datetime) -> Entry:
    if isinstance(change, BudgetChange):
        cleared = change.budget.period is None
        return Entry(
            at=now,
            actor=change.actor,
            authenticated_by=AUTHENTICATED_BY,
            on_behalf_of=change.on_behalf_of,
            account_id="",
            state="cleared" if cleared else "set",
            reason=change.reason,
            kind=TENANT_BUDGET,
            budget=change.budget,
        )
    return Entry(
        at=now,
        actor=change.actor,
        authenticated_by=AUTHENTICATED_BY,
        on_behalf_of=change.on_behalf_of,
        account_id=change.account_id,
        state=change.state,
        reason=change.reason,
    )


def head_of(snapshot: ChainSnapshot) -> ChainHead:
    last = snapshot.records[-1].hash if snapshot.records else None
    return ChainHead(len(snapshot.records), last, snapshot.anchor)


class AdminOverlay:
    def __init__(
        self,
        repository: AuditChain,
        witness: AuditWitness,
        audit_key: SecretStr | None,
        clock: Clock,
    ) -> None:
        self._repository = repository
        self._witness = witness
        self._key = audit_key.get_secret_value().encode() if audit_key is not None else None
        self._clock = clock
        # one tuple, rebound at once: a reader never sees one head with another's verdict
        self._cache: tuple[_CacheKey, ChainVerdict, float] | None = None
        self._pending: asyncio.Future[ChainVerdict] | None = None

    async def verdict(self) -> ChainVerdict:
        """The verified overlay, from the cache while the chain's head is unchanged.
        Concurrent callers share one read (and at most one fold) instead of each doing it."""
        pending = self._pending
        if pending is None:
            pending = self._pending = asyncio.ensure_future(self._checked_verdict())
            pending.add_done_callback(self._settled)
        return await asyncio.shield(pending)

    def _settled(self, done: asyncio.Future[ChainVerdict]) -> None:
        if self._pending is done:
            self._pending = None

    async def _checked_verdict(self) -> ChainVerdict:
        witness = await self._read_witness()
        head = await self._repository.read_head()
        cached = self._cache
        if (
            cached is not None
            and cached[0] == (head, witness)
            and self._clock.monotonic() - cached[2] < MAX_CACHE_AGE_S
        ):
            return cached[1]
        verdict, _ = await self._fold(witness)
        return verdict

    async def decided(self) -> ChainVerdict:
        """The overlay a mint or a renewal decides with: the cached fold, without a read, while
        it is younger than `MAX_CACHE_AGE_S` and verifies. Safe because their commit re-checks
        the chain under the lock (`revision` is the anchor's count and the records still end
        where the anchor says): a moved chain answers `AdminStateMoved`, and the caller calls
        `forget()` and decides again from a fresh fold."""
        cached = self._cache
        if (
            cached is not None
            and cached[1].status != "corrupt"
            and self._clock.monotonic() - cached[2] < MAX_CACHE_AGE_S
        ):
            return cached[1]
        return await self.verdict()

    def forget(self) -> None:
        """Drop the cached fold: the next read folds the chain from storage."""
        self._cache = None
        self._pending = None

    async def read_full(self) -> tuple[ChainVerdict, ChainSnapshot]:
        """A full read and fold, bypassing (and refreshing) the cache."""
        return await self._fold(await self._read_witness())

    async def _fold(self, witness: Witness | None) -> tuple[ChainVerdict, ChainSnapshot]:
        snapshot = await self._repository.read_chain()
        verdict = fold(snapshot.records, snapshot.anchor, key=self._key, witness=witness)
        previous = self._cache
        self._cache = ((head_of(snapshot), witness), verdict, self._clock.monotonic())
        if verdict.status == "corrupt":
            if previous is None or previous[1] != verdict:
                log.error(
                    "audit chain corrupt",
                    extra={"first_bad_seq": verdict.first_bad_seq, "problem": verdict.problem},
                )
        elif verdict.revision > 0:
            await self._advance_witness(Witness(verdict.revision, verdict.head_hash))
        return verdict, snapshot

    async def mutate(self, change: Change) -> tuple[AuditRecord, list[KeyRecord]]:
        """Append one record (revoking the account's live keys first when disabling).

        Raises `audit-chain-corrupt` while the chain does not verify and `revision-conflict`
        (carrying the current revision) on a stale `expected_revision`.
        """
        # Read before the lock: the witness only moves forward, so an older reading is weaker
        # but never wrong. An unreachable witness fails the mutation (503 unavailable).
        witness = await self._witness.read()
        now = self._clock.now()
        entry = entry_of(change, now)
        disabling = isinstance(change, StateChange) and change.state == "disabled"

        def prepare(snapshot: ChainSnapshot) -> AppendPlan:
            verdict = fold(snapshot.records, snapshot.anchor, key=self._key, witness=witness)
            if verdict.status == "corrupt":
                raise corrupt_error(verdict)
            if verdict.revision != change.expected_revision:
                raise conflict_error(verdict.revision)
            revoke = entry.account_id if disabling else None
            return AppendPlan(
                revoke_account=revoke,
                seal=lambda revoked: extend(verdict, entry, revoked_keys=revoked, key=self._key),
            )

        try:
            record, ended = await self._repository.append(prepare, now)
        except ChainRaced:
            current, _ = await self.read_full()
            raise conflict_error(current.revision) from None
        finally:
            self._cache = None
        await self._advance_witness(Witness(record.seq, record.hash))
        return record, ended

    async def report(self) -> Mapping[str, Any]:
        """For /readyz's body: the chain's state, which never makes the process unready."""
        try:
            async with asyncio.timeout(REPORT_DEADLINE_S):
                verdict = await self.verdict()
        except (StoreError, TimeoutError) as exc:  # TimeoutError: the deadline above
            return {"audit_chain": {"chain": "unknown", "error": failure_reason(exc)}}
        return {
            "audit_chain": {
                "chain": verdict.status,
                "revision": verdict.revision,
                "first_bad_seq": verdict.first_bad_seq,
            }
        }

    async def _read_witness(self) -> Witness | None:
        try:
            return await self._witness.read()
        except StoreError as exc:
            # Reads go on without it (the anchor still guards); mutations refuse instead.
            log.warning("audit witness unreadable", extra={"error": exc.reason})
            return None

    async def _advance_witness(self, witness: Witness) -> None:
        try:
            await self._witness.advance(witness)
        except StoreError as exc:
            # The append has committed: failing now would report a committed mutation as not
            # done. The next verified read moves the witness up.
            log.warning("audit witness not advanced", extra={"error": exc.reason})


def conflict_error(current_revision: int) -> GatewayError:
    return GatewayError(
        "revision-conflict",
        f"expected_revision is stale: the chain is at revision {current_revision}",
        extra={"revision": current_revision, "current_revision": current_revision},
    )
