"""Ending and renewing keys. Every path that ends a key goes through the store's single
`revoke` seam (an UPDATE that succeeds once), then fans the revocation out to every proxy."""

from __future__ import annotations

from typing import Any

from leasegate.control_plane.mint import key_of, key_ttl
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.views import key_view, mint_view
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError
from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    KeyNotLive,
    LeaseCapacityExhausted,
)
from leasegate.core.records import MintDecision
from leasegate.keys import new_key
from leasegate.routing.selection import filter_code


async def revoke(runtime: ControlRuntime, key_id: str) -> None:
    now = runtime.clock.now()
    record, _ended_now = await runtime.stores.store.revoke_key(key_id, "revoked", now)
    if record is None:
        raise GatewayError("key-not-found", "no such key")
    # Announce even when an earlier call ended it: a replay heals a lost fan-out message.
    await runtime.announce_revoked([record])


async def read(runtime: ControlRuntime, key_id: str) -> dict[str, Any]:
    record = await runtime.stores.store.get_key(key_id)
    if record is None:
        raise GatewayError("key-not-found", "no such key")
    return key_view(record, runtime.clock.now())


async def renew(runtime: ControlRuntime, key_id: str, ttl_s: int | None) -> dict[str, Any]:
    try:
        return await _renew(runtime, key_id, ttl_s)
    except AdminStateMoved:
        # decided from a cached overlay that an operator has since changed: once more, fresh
        runtime.overlay.forget()
    try:
        return await _renew(runtime, key_id, ttl_s)
    except AdminStateMoved:
        raise GatewayError(
            "account-state-unavailable", "account state changed while renewing: try again"
        ) from None


async def _renew(runtime: ControlRuntime, key_id: str, ttl_s: int | None) -> dict[str, Any]:
    store = runtime.stores.store
    old = await store.get_key(key_id)
    if old is None:
        raise GatewayError("key-not-found", "no such key")
    now = runtime.clock.now()
    if old.state(now) != "live":
        raise GatewayError("key-not-live", "the key is revoked or expired: mint again instead")
    previous = await store.get_decision(old.mint_decision_id)
    candidate = next(
        (c for c in runtime.registry.candidates(old.model) if c.account.id == old.account_id),
        None,
    )
    if previous is None or candidate is None:
        raise GatewayError(
            "not-configured", "the key's account no longer serves its model", status=409
        )
    facts = await runtime.facts([candidate])
    code = filter_code(candidate, facts, renewal=True)
    if code is not None:
        raise GatewayError(code, f"account {old.account_id} is not eligible: {code}", status=409)
    token, parsed = new_key()
    ttl = key_ttl(runtime, ttl_s)
    decision = MintDecision(
        id=new_id("md"),
        created_at=now,
        tenant=old.tenant,
        dispatch_id=old.dispatch_id,
        model=old.model,
        role=previous.role,
        kind="renewal",
        outcome="selected",
        hop=previous.hop,
        fallback_position=previous.fallback_position,
        account_id=old.account_id,
        served_model=old.served_model,
        key_id=parsed.key_id,
        # not a citation (no hop clause applies): the link keeps the dispatch's chain linear
        cites_decision_id=previous.id,
        chain_id=previous.chain_id or previous.id,
        budget_max_tokens=previous.budget_max_tokens,
        budget_max_cost=previous.budget_max_cost,
    )
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
    await runtime.announce_revoked([ended])
    return mint_view(decision, token, new)
