"""Every mint records a decision, refused or not: this is where the refused ones are written."""

from __future__ import annotations

from leasegate.control_plane.decision import Asked, Refusal, decision_of
from leasegate.control_plane.deps import MintDeps
from leasegate.core.errors import GatewayError


async def recorded(deps: MintDeps, asked: Asked, refusal: Refusal) -> GatewayError:
    """Record the refusal as this mint's decision; its error, now carrying the decision's id,
    for the caller to raise.

    Raises IdempotencyKeyTaken instead when a concurrent mint with the same idempotency key
    recorded first: the caller answers with that one.
    """
    decision = decision_of(deps.new_id("md"), deps.clock.now(), asked, refusal.start, refusal.error)
    await deps.store.record_decision(decision)
    refusal.error.mint_decision_id = decision.id
    return refusal.error
