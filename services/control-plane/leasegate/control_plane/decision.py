"""A mint's context and the one constructor of its decision record.

`Start` is what a mint carries from its first check to its decision: where the walk begins,
what it cites and which evidence row licensed it, the caller's idempotency key, and the chain
and budget it continues. A check either returns a new `Start` or a `Refusal` value; only
`decision_of` turns a `Start` and an outcome (`Chosen` or a refusal's error) into the
`MintDecision` that is recorded: fresh mints, hops, refusals and renewals alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from leasegate.core.errors import GatewayError, PassOver
from leasegate.core.records import MintDecision, MintKind
from leasegate.wire import MintBody


@dataclass(frozen=True, slots=True)
class Asked:
    """What the decision is about: the lineage and the caller's declared role."""

    tenant: str
    dispatch_id: str
    model: str
    role: str | None
    affinity: str | None = None
    """The session or task id the caller asked to stay with."""


@dataclass(frozen=True, slots=True)
class Start:
    """Where a mint's walk begins and what it inherits (a hop moves `position` and `hop`)."""

    position: int | None = 0
    """None while a citation has not yet been resolved to a position."""
    hop: int = 0
    kind: MintKind = "fresh"
    cites: str | None = None
    authorised_by: str | None = None
    idempotency_key: str | None = None
    fingerprint: str | None = None
    chain_id: str | None = None
    """The chain a hop continues (None: a fresh mint starts one)."""
    budget_max_tokens: int | None = None
    budget_max_cost: Decimal | None = None
    allowed_providers: tuple[str, ...] | None = None
    """The chain's own data residency (the mint's, inherited by its hops)."""
    allowed_regions: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Chosen:
    """A selected outcome: the account and served model at `position`, and the key it gets."""

    account_id: str
    served_model: str
    position: int | None
    key_id: str
    passed_over: tuple[PassOver, ...] = ()
    affinity_hit: bool = False
    """Chosen because the account last serving the mint's affinity had room."""
    affinity_miss: PassOver | None = None
    """The account last serving the mint's affinity, and why it was not chosen."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A check's answer that this mint is refused: recorded as a decision, then raised."""

    start: Start
    error: GatewayError


def asked_of(body: MintBody) -> Asked:
    return Asked(body.tenant, body.dispatch_id, body.model, body.role, body.affinity)


def start_of(body: MintBody, idempotency_key: str | None, fingerprint: str | None) -> Start:
    """The mint's context before any check: a citation's kind and target, nothing resolved."""
    if body.retry_of_mint_decision_id is not None:
        kind: MintKind = "retry"
        cites = body.retry_of_mint_decision_id
    elif body.supersedes_mint_decision_id is not None:
        kind, cites = "supersede", body.supersedes_mint_decision_id
    else:
        budget = body.budget
        return Start(
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            budget_max_tokens=budget.max_tokens if budget else None,
            budget_max_cost=budget.cost if budget else None,
            allowed_providers=body.allowed_providers,
            allowed_regions=body.allowed_regions,
        )
    return Start(
        position=None,
        kind=kind,
        cites=cites,
        idempotency_key=idempotency_key,
        fingerprint=fingerprint,
    )


def without_idempotency(start: Start) -> Start:
    """For refusals that must not claim the caller's key (it already names another decision)."""
    return replace(start, idempotency_key=None, fingerprint=None)


def decision_of(
    decision_id: str,
    at: datetime,
    asked: Asked,
    start: Start,
    outcome: Chosen | GatewayError,
) -> MintDecision:
    """The record of one decision. A selected one starts a chain when it continues none; a
    refusal keeps the position selection started at and the error's passed-over list."""
    common = MintDecision(
        id=decision_id,
        created_at=at,
        tenant=asked.tenant,
        dispatch_id=asked.dispatch_id,
        model=asked.model,
        role=asked.role,
        kind=start.kind,
        outcome="refused",
        hop=start.hop,
        fallback_position=start.position,
        cites_decision_id=start.cites,
        authorised_by_request_id=start.authorised_by,
        idempotency_key=start.idempotency_key,
        request_fingerprint=start.fingerprint,
        chain_id=start.chain_id,
        budget_max_tokens=start.budget_max_tokens,
        budget_max_cost=start.budget_max_cost,
        allowed_providers=start.allowed_providers,
        allowed_regions=start.allowed_regions,
        affinity=asked.affinity,
    )
    if isinstance(outcome, GatewayError):
        return replace(common, refusal_code=outcome.code, passed_over=outcome.passed_over)
    miss = outcome.affinity_miss
    return replace(
        common,
        outcome="selected",
        fallback_position=outcome.position,
        account_id=outcome.account_id,
        served_model=outcome.served_model,
        passed_over=outcome.passed_over,
        key_id=outcome.key_id,
        chain_id=start.chain_id or decision_id,
        affinity_hit=outcome.affinity_hit,
        affinity_miss_account_id=miss.account_id if miss is not None else None,
        affinity_miss_code=miss.code if miss is not None else None,
    )
