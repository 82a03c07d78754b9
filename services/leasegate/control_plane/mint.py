"""Mint: choose the account, reserve the lease, record the decision, hand out the key once.

The selection walk is pure (`routing.selection`); the reservation is the database's
(`commit_mint`, one transaction). Selection's capacity check is advisory: when the
reservation finds the account full after all, that candidate is recorded as
`lease-capacity-exhausted` and the walk continues past it, so a lost race never leaves a key
behind and never exceeds the ceiling.

Order of the answers (SPEC §3): citation-conflict and a too-long ttl, then the hop clauses
(`hops.authorise_hop`), then model-not-served, dispatch-lease-held, and selection. Every
answer, refused or not, is a recorded decision; an `Idempotency-Key` replays it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from leasegate.accounts import Candidate
from leasegate.control_plane.hops import authorise_hop
from leasegate.control_plane.idempotency import fingerprint, replay
from leasegate.control_plane.refusals import Start, refuse, start_of
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.schemas import MintBody
from leasegate.control_plane.views import mint_view
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError, PassOver
from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    IdempotencyKeyTaken,
    LeaseCapacityExhausted,
)
from leasegate.core.records import KeyRecord, MintDecision
from leasegate.keys import ParsedKey, hash_secret, new_key
from leasegate.routing.selection import NoneEligible, Selected, none_eligible, select
from leasegate.web.tracing import step

_MAX_REDECISIONS = 3


@dataclass(frozen=True, slots=True)
class Minted:
    status: int
    """201 for a new mint, 200 for an idempotent replay of one."""
    view: dict[str, Any]


async def mint(
    runtime: ControlRuntime, body: MintBody, idempotency_key: str | None = None
) -> Minted:
    digest = fingerprint(body) if idempotency_key is not None else None
    start = start_of(body, idempotency_key, digest)
    store = runtime.stores.store
    if idempotency_key is not None:
        earlier = await store.find_idempotent(body.tenant, idempotency_key)
        if earlier is not None:
            return Minted(200, await replay(runtime, body, start, earlier))
    try:
        return Minted(201, await _mint(runtime, body, start))
    except IdempotencyKeyTaken:
        # a concurrent request with the same key recorded its decision first: answer as it
        assert idempotency_key is not None  # noqa: S101 - only keyed mints can collide
        earlier = await store.find_idempotent(body.tenant, idempotency_key)
        if earlier is None:
            raise
        return Minted(200, await replay(runtime, body, start, earlier))


async def _mint(runtime: ControlRuntime, body: MintBody, start: Start) -> dict[str, Any]:
    """The checks in SPEC order: shape, then the hop clauses, then the dispatch's lease."""
    if body.retry_of_mint_decision_id and body.supersedes_mint_decision_id:
        await refuse(
            runtime,
            body,
            start,
            GatewayError(
                "citation-conflict",
                "retry_of_mint_decision_id and supersedes_mint_decision_id are mutually exclusive",
            ),
        )
    try:
        ttl_s = key_ttl(runtime, body.ttl_s)
    except GatewayError as error:
        await refuse(runtime, body, start, error)
    if start.cites is not None:
        start = await authorise_hop(runtime, body, start)
    candidates = runtime.registry.candidates(body.model)
    if not candidates:
        unknown = GatewayError("model-not-served", "no account serves the requested model")
        await refuse(runtime, body, start, unknown)
    await _hold_while_chain_corrupt(runtime, body, start)
    return await _walk(runtime, body, start, candidates, ttl_s)


async def _hold_while_chain_corrupt(runtime: ControlRuntime, body: MintBody, start: Start) -> None:
    """Nothing fails open: an overlay that does not verify might hide a disabled account.
    Checked after every rejection that applies, so a bad request is never told to wait."""
    verdict = await runtime.overlay.decided()
    if verdict.status == "corrupt":
        held = GatewayError(
            "account-state-unavailable",
            "the admin audit chain does not verify: every mint is held until an operator "
            "repairs it",
        )
        await refuse(runtime, body, start, held)


async def _walk(
    runtime: ControlRuntime,
    body: MintBody,
    start: Start,
    candidates: Sequence[Candidate],
    ttl_s: int,
) -> dict[str, Any]:
    """Select from the start position; a reservation that finds the account full after all
    records it as passed over and walks on."""
    with step("mint.facts"):
        facts = await runtime.facts(candidates)
    position = start.position or 0
    passed_over: tuple[PassOver, ...] = ()
    redecisions = 0
    while True:
        with step("mint.selection"):
            outcome = select(candidates, facts, position, passed_over)
        if isinstance(outcome, NoneEligible):
            await _no_eligible(runtime, body, start, outcome)
        assert isinstance(outcome, Selected)  # noqa: S101 - _no_eligible always raises
        try:
            with step("mint.commit"):  # one transaction: reserve the lease, record, commit
                return await _commit(runtime, body, start, outcome, ttl_s, facts.admin_revision)
        except AdminStateMoved:
            # an operator changed account state while this mint decided: decide again
            redecisions += 1
            if redecisions > _MAX_REDECISIONS:
                raise GatewayError(
                    "account-state-unavailable", "account state is changing: try again"
                ) from None
            runtime.overlay.forget()
            await _hold_while_chain_corrupt(runtime, body, start)
            facts = await runtime.facts(candidates)
            position, passed_over = start.position or 0, ()
        except LeaseCapacityExhausted:
            chosen = outcome.candidate
            full = PassOver(chosen.account.id, "lease-capacity-exhausted")
            passed_over = (*outcome.passed_over, full)
            position = chosen.position + 1
            if position >= len(candidates):
                refusal = none_eligible(candidates, facts, passed_over)
                await _no_eligible(runtime, body, start, refusal)


async def _commit(
    runtime: ControlRuntime,
    body: MintBody,
    start: Start,
    chosen: Selected,
    ttl_s: int,
    admin_revision: int,
) -> dict[str, Any]:
    now = runtime.clock.now()
    candidate: Candidate = chosen.candidate
    token, parsed = new_key()
    decision_id = new_id("md")
    decision = MintDecision(
        id=decision_id,
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
        idempotency_key=start.idempotency_key,
        request_fingerprint=start.fingerprint,
        chain_id=start.chain_id or decision_id,
        budget_max_tokens=start.budget_max_tokens,
        budget_max_cost=start.budget_max_cost,
    )
    key = key_of(decision, parsed, ttl_s)
    try:
        await runtime.stores.store.commit_mint(
            decision,
            key,
            lease_capacity=candidate.account.lease_capacity,
            now=now,
            admin_revision=admin_revision,
        )
    except DispatchLeaseHeld:
        await refuse(runtime, body, start, _lease_held())
    except CitedDecisionSuperseded:
        # a concurrent hop citing the same decision committed first: chains never branch
        await refuse(
            runtime,
            body,
            start,
            GatewayError(
                "fallback-cited-decision-superseded",
                "the cited decision already has a successor",
            ),
        )
    return mint_view(decision, token, key)


def _lease_held() -> GatewayError:
    return GatewayError(
        "dispatch-lease-held", "this dispatch already holds a live lease: revoke it first"
    )


async def _no_eligible(
    runtime: ControlRuntime, body: MintBody, start: Start, outcome: NoneEligible
) -> None:
    """`dispatch-lease-held` comes before selection's answer (SPEC order). A selected mint
    learns it from its commit (the UNIQUE live_dispatch column decides every race); only a
    mint nobody can serve needs this read, so the common path spends no round trip on it."""
    if await runtime.stores.store.live_key_of_dispatch(
        body.tenant, body.dispatch_id, runtime.clock.now()
    ):
        await refuse(runtime, body, start, _lease_held())
    await refuse(
        runtime,
        body,
        start,
        GatewayError(
            "no-eligible-account",
            "no account can serve the requested model now",
            passed_over=outcome.passed_over,
            cooldown_scope=outcome.cooldown_scope,
            retry_after_s=outcome.retry_after_s,
        ),
    )


def key_of(decision: MintDecision, parsed: ParsedKey, ttl_s: int) -> KeyRecord:
    """The key a selected decision hands out: its lease, on the decision's account."""
    if decision.account_id is None or decision.served_model is None:
        raise ValueError("only a selected decision hands out a key")
    return KeyRecord(
        key_id=parsed.key_id,
        secret_hash=hash_secret(parsed.secret),
        mint_decision_id=decision.id,
        tenant=decision.tenant,
        dispatch_id=decision.dispatch_id,
        model=decision.model,
        served_model=decision.served_model,
        account_id=decision.account_id,
        created_at=decision.created_at,
        expires_at=decision.created_at + timedelta(seconds=ttl_s),
        chain_id=decision.chain_id,
        budget_max_tokens=decision.budget_max_tokens,
        budget_max_cost=decision.budget_max_cost,
    )


def key_ttl(runtime: ControlRuntime, requested: int | None) -> int:
    settings = runtime.settings
    ttl = requested if requested is not None else settings.key_ttl_s
    if ttl > settings.key_max_ttl_s:
        raise GatewayError("invalid-request", f"ttl_s must not exceed {settings.key_max_ttl_s}")
    return ttl
