"""Every mint records a decision, refused or not: this is where the refused ones are written.

`Start` is what a mint carries from its first check to its decision: where the walk begins,
what it cites and which evidence row licensed it, and the caller's idempotency key.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import NoReturn

from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.schemas import MintBody
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError
from leasegate.core.records import MintDecision, MintKind


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
        )
    return Start(
        position=None,
        kind=kind,
        cites=cites,
        idempotency_key=idempotency_key,
        fingerprint=fingerprint,
    )


async def refuse(
    runtime: ControlRuntime, body: MintBody, start: Start, error: GatewayError
) -> NoReturn:
    """Record `error` as this mint's decision, then raise it carrying the decision's id.

    Raises IdempotencyKeyTaken instead when a concurrent mint with the same idempotency key
    recorded first: the caller answers with that one.
    """
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
        refusal_code=error.code,
        passed_over=error.passed_over,
        cites_decision_id=start.cites,
        authorised_by_request_id=start.authorised_by,
        idempotency_key=start.idempotency_key,
        request_fingerprint=start.fingerprint,
        chain_id=start.chain_id,
        budget_max_tokens=start.budget_max_tokens,
        budget_max_cost=start.budget_max_cost,
    )
    await runtime.stores.store.record_decision(decision)
    error.mint_decision_id = decision.id
    raise error


def without_idempotency(start: Start) -> Start:
    """For refusals that must not claim the caller's key (it already names another decision)."""
    return replace(start, idempotency_key=None, fingerprint=None)
