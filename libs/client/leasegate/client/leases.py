"""The control-plane side of one dispatch run: acquire, revoke, renew and release its lease
through the hop protocol (docs/hops.md), every wait bounded by the run's deadline.

At most one lease of the dispatch is live at any moment: a hop or a supersede is only sent
after the lease it cites was revoked, and a renewal ends the old key in the same transaction
that creates the new one.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from leasegate.client import wire
from leasegate.client.control import AsyncControlClient
from leasegate.client.errors import (
    ControlUnreachable,
    DispatchEnd,
    DispatchFailed,
    GatewayRefusal,
)
from leasegate.client.records import DecisionKind, Evidence, Link, Minted
from leasegate.client.wire import Operation
from leasegate.wire import Budget

T = TypeVar("T")
# held refusals that waiting does not cure for this run: the ceiling, or someone else's lease
_STOP_WHEN_HELD = frozenset({"fallback-budget-exhausted", "dispatch-lease-held"})
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Identity:
    tenant: str
    dispatch_id: str
    model: str
    role: str | None
    ttl_s: int | None
    budget: Budget | None = None
    affinity: str | None = None
    """The session or task id whose account the dispatch asks to stay on."""
    allowed_providers: tuple[str, ...] | None = None
    """Data residency: the provider kinds the dispatch may be served by (every hop too)."""
    allowed_regions: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    kind: Literal["retry", "supersede"]
    decision_id: str
    key_id: str
    """The cited decision's key: revoked before the citation is sent."""


def mint_operation(
    ident: Identity, citation: Citation | None = None, idempotency_key: str | None = None
) -> Operation[Minted]:
    """The dispatch's mint: its identity, citing `citation` (a hop's or a supersede's)."""
    cites = citation.decision_id if citation is not None else None
    kind = citation.kind if citation is not None else None
    return wire.mint(
        ident.tenant,
        ident.dispatch_id,
        ident.model,
        role=ident.role,
        ttl_s=ident.ttl_s,
        budget=ident.budget,
        retry_of_mint_decision_id=cites if kind == "retry" else None,
        supersedes_mint_decision_id=cites if kind == "supersede" else None,
        idempotency_key=idempotency_key,
        affinity=ident.affinity,
        allowed_providers=ident.allowed_providers,
        allowed_regions=ident.allowed_regions,
    )


@dataclass(frozen=True, slots=True)
class Lease:
    link: Link
    key: str
    expires_at: datetime


class Deadline:
    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return self._end - self._clock()


class Leases:
    def __init__(
        self,
        control: AsyncControlClient,
        identity: Identity,
        deadline: Deadline,
        *,
        request_timeout_s: float,
        renew_within_s: float,
        idempotency_prefix: str | None,
        sleep: Callable[[float], Awaitable[None]],
        wall: Callable[[], datetime],
    ) -> None:
        self.control = control
        self.identity = identity
        self.deadline = deadline
        self.request_timeout_s = request_timeout_s
        self.renew_within_s = renew_within_s
        self.sleep = sleep
        self.wall = wall
        self.chain: list[Link] = []
        self.live: Lease | None = None
        self.last_refusal: GatewayRefusal | None = None
        self.last_failure: BaseException | None = None
        self._prefix = idempotency_prefix or (
            f"lg-{identity.dispatch_id[:150]}-{secrets.token_hex(6)}"
        )
        self._attempts = 0

    def fail(self, reason: DispatchEnd, message: str) -> DispatchFailed:
        return DispatchFailed(
            reason,
            message,
            chain=tuple(self.chain),
            refusal=self.last_refusal,
            failure=self.last_failure,
        )

    async def send(self, op: Operation[T]) -> T:
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise self.fail("deadline", f"deadline reached before {op.method} {op.path}")
        return await self.control.send(op, timeout_s=min(self.request_timeout_s, remaining))

    async def wait(self, seconds: float, why: str) -> None:
        """Sleep, unless that would pass the deadline: then end the run at once."""
        if seconds > self.deadline.remaining():
            raise self.fail("deadline", f"{why}: waiting {seconds:g}s would pass the deadline")
        await self.sleep(seconds)

    def retried(self, lease: Lease, why: str) -> None:
        """Note on the chain that `lease` is tried again after a transient failure."""
        for i, link in enumerate(self.chain):
            if link.mint_decision_id == lease.link.mint_decision_id:
                self.chain[i] = replace(link, retried=(*link.retried, why))

    def ended(self, lease: Lease, why: str | None) -> None:
        """Note on the chain why the dispatch moves on from `lease`."""
        for i, link in enumerate(self.chain):
            if link.mint_decision_id == lease.link.mint_decision_id:
                self.chain[i] = replace(link, ended=why)

    async def acquire(self, citation: Citation | None) -> Lease:
        """A new lease for the dispatch: fresh, or a hop/supersede citing a revoked one."""
        while True:
            op = self._mint_op(citation)
            try:
                minted = await self._replayable(op)
            except GatewayRefusal as refusal:
                await self._after_refusal(refusal, citation)
                continue
            kind: DecisionKind = citation.kind if citation is not None else "fresh"
            if minted.key is None:
                # This attempt minted, but its answer was lost: the secret is gone for good.
                # End that lease, then supersede its decision (same position, no hop used).
                self.chain.append(_link(minted, kind, ended="response-lost"))
                await self.revoke(minted.key_id)
                citation = Citation("supersede", minted.mint_decision_id, minted.key_id)
                continue
            return self._took(minted, kind)

    def _mint_op(self, citation: Citation | None) -> Operation[Minted]:
        self._attempts += 1
        # one key per attempt: a replay of the same attempt answers the same decision
        return mint_operation(self.identity, citation, f"{self._prefix}/{self._attempts}")

    async def _replayable(self, op: Operation[Minted]) -> Minted:
        """Send a mint; when no answer came back, replay the same Idempotency-Key and body
        until the gateway answers (a replay of a mint that happened answers `key: null`)."""
        attempt = 0
        while True:
            try:
                return await self.send(op)
            except ControlUnreachable as lost:
                self.last_failure = lost
                await self.wait(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)], str(lost))
                attempt += 1

    async def _after_refusal(self, refusal: GatewayRefusal, citation: Citation | None) -> None:
        """Wait out a held refusal that time (or our own revoke) can cure; raise otherwise."""
        self.last_refusal = refusal
        wait = _hold_for(refusal, citation)
        if wait is None:
            raise self.fail("refused", f"the gateway refused: {refusal.code}") from refusal
        if refusal.code == "fallback-lease-still-held" and citation is not None:
            await self.revoke(citation.key_id)
        if refusal.code == "fallback-not-authorised" and citation is not None:
            rows = await self.send(wire.evidence(decision_id=citation.decision_id))
            if rows and not any(_licenses(row, self.identity) for row in rows):
                # the proxy's rows are written and none qualifies: no wait will change that
                raise self.fail("refused", "the failure does not qualify for a hop") from refusal
        await self.wait(wait, refusal.code)

    async def revoke(self, key_id: str) -> None:
        """End a key (idempotent); retried while the control plane does not answer."""
        attempt = 0
        while True:
            try:
                await self.send(wire.revoke(key_id))
                break
            except ControlUnreachable as lost:
                self.last_failure = lost
                await self.wait(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)], str(lost))
                attempt += 1
            except GatewayRefusal as refusal:
                if refusal.code == "key-not-found":
                    break
                self.last_refusal = refusal
                if not refusal.held or refusal.retry_after_s is None:
                    raise self.fail("refused", f"revoke refused: {refusal.code}") from refusal
                await self.wait(refusal.retry_after_s, refusal.code)
        if self.live is not None and self.live.link.key_id == key_id:
            self.live = None

    async def fresh(self, lease: Lease) -> Lease:
        """`lease`, renewed first when its key expires within `renew_within_s`."""
        left = lease.expires_at - self.wall()
        if left > timedelta(seconds=self.renew_within_s):
            return lease
        try:
            renewed = await self.send(wire.renew(lease.link.key_id, self.identity.ttl_s))
        except GatewayRefusal as refusal:
            self.last_refusal = refusal
            if left > timedelta(0) and refusal.code != "key-not-live":
                return lease  # still usable: the call will show whether the account is
            self.ended(lease, f"renewal refused: {refusal.code}")
            self.live = None
            return await self.acquire(None)
        except ControlUnreachable as lost:
            self.last_failure = lost
            return await self._lost_renewal(lease)
        self.ended(lease, "renewed")
        return self._took(renewed, "renewal")

    async def _lost_renewal(self, lease: Lease) -> Lease:
        """A renewal whose answer was lost may have ended the old key: if it did, end the
        renewal's key too and supersede the renewal's decision."""
        old = await self.send(wire.decision(lease.link.mint_decision_id))
        successor = old.successor_mint_decision_id
        if successor is None:
            return lease  # nothing happened: the old key is still the dispatch's lease
        renewal = await self.send(wire.decision(successor))
        self.ended(lease, "renewed (answer lost)")
        self.live = None
        if renewal.key_id is None:
            return await self.acquire(None)
        await self.revoke(renewal.key_id)
        return await self.acquire(Citation("supersede", successor, renewal.key_id))

    def _took(self, minted: Minted, kind: DecisionKind) -> Lease:
        assert minted.key is not None  # noqa: S101 - callers handle a replay's missing key
        lease = Lease(_link(minted, kind), minted.key, minted.expires_at)
        self.chain.append(lease.link)
        self.live = lease
        return lease

    async def release(self) -> None:
        """Revoke the live lease when the run ends, answer or not; best effort, bounded."""
        lease, self.live = self.live, None
        if lease is None:
            return
        try:
            await self.control.send(
                wire.revoke(lease.link.key_id), timeout_s=self.request_timeout_s
            )
        except (ControlUnreachable, GatewayRefusal):
            pass  # the key still expires at its TTL; the run's own outcome matters more


def _licenses(row: Evidence, identity: Identity) -> bool:
    """Whether a written row can license this hop: a qualifying one, or for a hop to another
    model (a context fallback) a context-length-exceeded one."""
    return row.qualifying or (
        row.outcome == "context-length-exceeded" and row.requested_model != identity.model
    )


def _hold_for(refusal: GatewayRefusal, citation: Citation | None) -> float | None:
    """How long to wait before the next attempt; None when waiting cannot help."""
    if not refusal.held or refusal.code in _STOP_WHEN_HELD:
        return None
    if refusal.code == "no-eligible-account":
        if citation is not None and citation.kind == "retry" and not refusal.passed_over:
            return None  # the hop walked past the end of the candidate list
        return refusal.retry_after_s  # None when nothing passed over is transient
    return refusal.retry_after_s


def _link(minted: Minted, kind: DecisionKind, ended: str | None = None) -> Link:
    return Link(
        mint_decision_id=minted.mint_decision_id,
        kind=kind,
        account_id=minted.account_id,
        served_model=minted.served_model,
        fallback_position=minted.fallback_position,
        hop=minted.hop,
        key_id=minted.key_id,
        ended=ended,
    )
