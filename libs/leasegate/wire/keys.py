"""Keys on the wire: the mint's answer (also a renewal's) and a key's state.

`PassOver` is the error envelope's (`leasegate.core.envelope`): a mint and a refusal name a
passed-over candidate the same way."""

from __future__ import annotations

from pydantic import Field

from leasegate.core.envelope import PassOver
from leasegate.core.records import KeyState
from leasegate.wire.base import Money, Time, WireModel

__all__ = ["Budget", "KeyInfo", "MintAnswer", "PassOver"]


class Budget(WireModel):
    """A dispatch's spend ceiling, shared by its whole chain: in a mint's answer, and what a
    client sends in a mint (at least one bound; the server refuses an empty one with 400)."""

    max_tokens: int | None = None
    max_cost: Money | None = None


class MintAnswer(WireModel):
    """`POST /keys` (201, or 200 for an idempotent replay) and `POST /keys/{id}/renew`."""

    key: str | None
    """The virtual key, shown once; null when this is an idempotent replay."""
    key_id: str
    mint_decision_id: str
    account_id: str
    model: str
    served_model: str
    fallback_position: int
    hop: int
    expires_at: Time
    passed_over: tuple[PassOver, ...] = Field(default=())
    chain_id: str | None = None
    """The dispatch's chain (its first decision's id): hops and renewals share it."""
    budget: Budget | None = None


class KeyInfo(WireModel):
    """`GET /keys/{id}`. Never the secret nor its hash."""

    key_id: str
    state: KeyState
    mint_decision_id: str
    tenant: str
    dispatch_id: str
    account_id: str
    model: str
    served_model: str
    created_at: Time
    expires_at: Time
    revoked_at: Time | None
    revoke_reason: str | None
    chain_id: str | None = None
    budget: Budget | None = None
