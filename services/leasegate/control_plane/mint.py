"""Mint: choose the account, reserve the lease, record the decision, hand out the key once.

The selection walk is pure (`routing.selection`); the reservation is the database's
(`commit_mint`, one transaction). Selection's capacity check is advisory: when the
reservation finds the account full after all, that candidate is recorded as
`lease-capacity-exhausted` and the walk continues past it, so a lost race never leaves a key
behind and never exceeds the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from leasegate.accounts import Candidate
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.schemas import MintBody
from leasegate.control_plane.views import mint_view
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError, PassOver
from leasegate.core.ports.storage import DispatchLeaseHeld, LeaseCapacityExhausted
from leasegate.core.records import KeyRecord, MintDecision, MintKind
from leasegate.keys import hash_secret, new_key
from leasegate.routing.selection import NoneEligible, Selected, none_eligible, select


@dataclass(frozen=True, slots=True)
class Start:
    """Where a mint's walk begins and what it inherits (a hop moves `position` and `hop`)."""

    position: int = 0
    hop: int = 0
    kind: MintKind = "fresh"
    cites: str | None = None
    authorised_by: str | None = None


async def mint(runtime: ControlRuntime, body: MintBody) -> dict[str, Any]:
    if body.retry_of_mint_decision_id and body.supersedes_mint_decision_id:
        raise GatewayError(
            "citation-conflict",
            "retry_of_mint_decision_id and supersedes_mint_decision_id are mutually exclusive",
        )
    await _hold_while_chain_corrupt(runtime, body)
    if body.retry_of_mint_decision_id or body.supersedes_mint_decision_id:
        raise GatewayError(
            "invalid-request",
            "citations (retry_of / supersedes) are not supported by this gateway yet",
            status=422,
        )
    return await _walk(runtime, body, Start())


async def _hold_while_chain_corrupt(runtime: ControlRuntime, body: MintBody) -> None:
    """Nothing fails open: an overlay that does not verify might hide a disabled account."""
    verdict = await runtime.overlay.verdict()
    if verdict.status != "corrupt":
        return
    decision = await _refuse(runtime, body, Start(), "account-state-unavailable", ())
    raise GatewayError(
        "account-state-unavailable",
        "the admin audit chain does not verify: every mint is held until an operator repairs it",
        mint_decision_id=decision.id,
    )


async def _walk(runtime: ControlRuntime, body: MintBody, start: Start) -> dict[str, Any]:
    ttl_s = key_ttl(runtime, body.ttl_s)
    candidates = runtime.registry.candidates(body.model)
    if not candidates:
        decision = await _refuse(runtime, body, start, "model-not-served", ())
        raise GatewayError(
            "model-not-served",
            f"no account serves {body.model!r}",
            mint_decision_id=decision.id,
        )
    facts = await runtime.facts(candidates)
    position = start.position
    passed_over: tuple[PassOver, ...] = ()
    while True:
        outcome = select(candidates, facts, position, passed_over)
        if isinstance(outcome, NoneEligible):
            await _no_eligible(runtime, body, start, outcome)
        assert isinstance(outcome, Selected)  # noqa: S101 - _no_eligible always raises
        try:
            return await _commit(runtime, body, start, outcome, ttl_s)
        except LeaseCapacityExhausted:
            chosen = outcome.candidate
            full = PassOver(chosen.account.id, "lease-capacity-exhausted")
            passed_over = (*outcome.passed_over, full)
            position = chosen.position + 1
            if position >= len(candidates):
                refusal = none_eligible(candidates, facts, passed_over)
                await _no_eligible(runtime, body, start, refusal)


async def _commit(
    runtime: ControlRuntime, body: MintBody, start: Start, chosen: Selected, ttl_s: int
) -> dict[str, Any]:
    now = runtime.clock.now()
    candidate: Candidate = chosen.candidate
    token, parsed = new_key()
    decision = MintDecision(
        id=new_id("md"),
        created_at=now,
        tenant=body.tenant,
        dispatch_id=body.dispatch_id,
        model=body.model,
        role=body.role,
        kind=start.kind,
        outcome="selected",
        hop=start.hop,
        fallback_position=candidate.position,
        account_id=candidate.account.id,
        served_model=candidate.served_model,
        passed_over=chosen.passed_over,
        key_id=parsed.key_id,
        cites_decision_id=start.cites,
        authorised_by_request_id=start.authorised_by,
    )
    key = KeyRecord(
        key_id=parsed.key_id,
        secret_hash=hash_secret(parsed.secret),
        mint_decision_id=decision.id,
        tenant=body.tenant,
        dispatch_id=body.dispatch_id,
        model=body.model,
        served_model=candidate.served_model,
        account_id=candidate.account.id,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    try:
        await runtime.stores.store.commit_mint(
            decision, key, lease_capacity=candidate.account.lease_capacity, now=now
        )
    except DispatchLeaseHeld:
        refused = await _refuse(runtime, body, start, "dispatch-lease-held", chosen.passed_over)
        raise GatewayError(
            "dispatch-lease-held",
            "this dispatch already holds a live lease: revoke it first",
            mint_decision_id=refused.id,
        ) from None
    return mint_view(decision, token, key)


async def _no_eligible(
    runtime: ControlRuntime, body: MintBody, start: Start, outcome: NoneEligible
) -> None:
    decision = await _refuse(runtime, body, start, "no-eligible-account", outcome.passed_over)
    raise GatewayError(
        "no-eligible-account",
        f"no account can serve {body.model!r} now",
        passed_over=outcome.passed_over,
        cooldown_scope=outcome.cooldown_scope,
        retry_after_s=outcome.retry_after_s,
        mint_decision_id=decision.id,
    )


async def _refuse(
    runtime: ControlRuntime,
    body: MintBody,
    start: Start,
    code: str,
    passed_over: tuple[PassOver, ...],
) -> MintDecision:
    decision = MintDecision(
        id=new_id("md"),
        created_at=runtime.clock.now(),
        tenant=body.tenant,
        dispatch_id=body.dispatch_id,
        model=body.model,
        role=body.role,
        kind=start.kind,
        outcome="refused",
        hop=start.hop,
        fallback_position=start.position,
        refusal_code=code,
        passed_over=passed_over,
        cites_decision_id=start.cites,
    )
    await runtime.stores.store.record_decision(decision)
    return decision


def key_ttl(runtime: ControlRuntime, requested: int | None) -> int:
    settings = runtime.settings
    ttl = requested if requested is not None else settings.key_ttl_s
    if ttl > settings.key_max_ttl_s:
        raise GatewayError("invalid-request", f"ttl_s must not exceed {settings.key_max_ttl_s}")
    return ttl
