"""Ending and renewing keys. Every path that ends a key goes through the store's single
`revoke` seam (an UPDATE that succeeds once), then fans the revocation out to every proxy."""

from __future__ import annotations

from typing import Protocol

from leasegate.control_plane.decision import Asked, Chosen, Start, decision_of
from leasegate.control_plane.deps import (
    MintDeps,
    RevocationPublisher,
    announce_revoked,
    live_facts,
)
from leasegate.control_plane.mint import key_of, key_ttl
from leasegate.control_plane.views import key_view, mint_view
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    KeyNotLive,
    KeyRevoker,
    LeaseCapacityExhausted,
)
from leasegate.core.records import REVOKED, KeyRecord, MintDecision
from leasegate.keys import new_key
from leasegate.routing.selection import filter_code
from leasegate.wire import KeyInfo, MintAnswer


class Revoking(Protocol):
    """What ending a key uses: the clock, the store's revoke seam and the revocation bus.
    `MintDeps` has them (the API's route); the console is handed the same object as this."""

    @property
    def clock(self) -> Clock: ...

    @property
    def store(self) -> KeyRevoker: ...

    @property
    def revocations(self) -> RevocationPublisher: ...


async def revoke(deps: Revoking, key_id: str) -> None:
    now = deps.clock.now()
    record, _ended_now = await deps.store.revoke_key(key_id, REVOKED, now)
    if record is None:
        raise GatewayError("key-not-found", "no such key")
    # Announce even when an earlier call ended it: a replay heals a lost fan-out message.
    await announce_revoked(deps.revocations, [record])


async def read(deps: MintDeps, key_id: str) -> KeyInfo:
    record = await deps.store.get_key(key_id)
    if record is None:
        raise GatewayError("key-not-found", "no such key")
    return key_view(record, deps.clock.now())


async def renew(deps: MintDeps, key_id: str, ttl_s: int | None) -> MintAnswer:
    try:
        return await _renew(deps, key_id, ttl_s)
    except AdminStateMoved:
        # decided from a cached overlay that an operator has since changed: once more, fresh
        deps.overlay.forget()
    try:
        return await _renew(deps, key_id, ttl_s)
    except AdminStateMoved:
        raise GatewayError(
            "account-state-unavailable", "account state changed while renewing: try again"
        ) from None


async def _renew(deps: MintDeps, key_id: str, ttl_s: int | None) -> MintAnswer:
    store = deps.store
    found = await store.get_key_and_decision(key_id)
    if found is None:
        raise GatewayError("key-not-found", "no such key")
    old, previous = found
    now = deps.clock.now()
    if old.state(now) != "live":
        raise GatewayError("key-not-live", "the key is revoked or expired: mint again instead")
    candidate = next(
        (c for c in deps.registry.candidates(old.model) if c.account.id == old.account_id),
        None,
    )
    if previous is None or candidate is None:
        raise GatewayError(
            "not-configured", "the key's account no longer serves its model", status=409
        )
    facts = await live_facts(deps, [candidate])
    code = filter_code(candidate, facts, renewal=True)
    if code is not None:
        raise GatewayError(code, f"account {old.account_id} is not eligible: {code}", status=409)
    ttl = key_ttl(deps.limits, ttl_s)
    if isinstance(ttl, GatewayError):
        raise ttl
    token, parsed = new_key()
    chosen = Chosen(
        old.account_id, old.served_model, previous.fallback_position, key_id=parsed.key_id
    )
    decision = decision_of(deps.new_id("md"), now, _asked(old, previous), _start(previous), chosen)
    new = key_of(decision, parsed, ttl)
    try:
        ended = await store.renew_key(
            key_id,
            decision,
            new,
            lease_capacity=candidate.account.lease_capacity,
            now=now,
            admin_revision=facts.admin_revision,
        )
    except (KeyNotLive, CitedDecisionSuperseded):
        raise GatewayError("key-not-live", "the key ended while renewing: mint again") from None
    except LeaseCapacityExhausted:
        raise GatewayError(
            "lease-capacity-exhausted", "the account's lease ceiling is reached", status=409
        ) from None
    await announce_revoked(deps.revocations, [ended])
    return mint_view(decision, token, new)


def _asked(old: KeyRecord, previous: MintDecision) -> Asked:
    # the renewal keeps the affinity: its account still serves the session, from now
    return Asked(old.tenant, old.dispatch_id, old.model, previous.role, previous.affinity)


def _start(previous: MintDecision) -> Start:
    """A renewal continues the renewed decision where it stood. Its link to that decision is
    not a citation (no hop clause applies): it keeps the dispatch's chain linear."""
    return Start(
        position=previous.fallback_position,
        hop=previous.hop,
        kind="renewal",
        cites=previous.id,
        chain_id=previous.chain_id or previous.id,
        budget_max_tokens=previous.budget_max_tokens,
        budget_max_cost=previous.budget_max_cost,
    )
