"""Keys on the wire: the mint's body and its answer (also a renewal's), and a key's state.

`PassOver` is the error envelope's (`leasegate.core.envelope`): a mint and a refusal name a
passed-over candidate the same way."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, model_validator

from leasegate.core.envelope import PassOver
from leasegate.core.records import KeyState
from leasegate.wire.base import Money, Time, WireModel
from leasegate.wire.fields import (
    Affinity,
    DecisionId,
    DispatchPart,
    MaxCost,
    MaxTokens,
    ModelName,
    ProviderNames,
    Regions,
    RequestBody,
    Role,
)

__all__ = ["Budget", "BudgetBody", "KeyInfo", "MintAnswer", "MintBody", "PassOver", "RenewBody"]


class BudgetBody(RequestBody):
    """A dispatch's spend ceiling, shared by its whole chain; at least one bound."""

    max_tokens: MaxTokens | None = None
    max_cost: MaxCost | None = None

    @model_validator(mode="after")
    def _bounded(self) -> BudgetBody:
        if self.max_tokens is None and self.max_cost is None:
            raise ValueError("a budget needs max_tokens, max_cost or both")
        return self

    @property
    def cost(self) -> Decimal | None:
        return Decimal(self.max_cost) if self.max_cost is not None else None


# `POST /keys` (the client's `mint`). No docstring, here or on `RenewBody`: it would become
# the schema's description in the OpenAPI document.
class MintBody(RequestBody):
    tenant: DispatchPart
    dispatch_id: DispatchPart
    model: ModelName
    role: Role | None = None
    ttl_s: int | None = Field(default=None, gt=0)
    retry_of_mint_decision_id: DecisionId | None = None
    supersedes_mint_decision_id: DecisionId | None = None
    budget: BudgetBody | None = None
    affinity: Affinity | None = None
    allowed_providers: ProviderNames | None = None
    """Data residency: the provider kinds this dispatch may be served by (within the
    tenant's configured ones); a hop keeps its chain's."""
    allowed_regions: Regions | None = None
    """Data residency: the regions (an account's `region` / `location`) it may be served in."""


class RenewBody(RequestBody):  # `POST /keys/{id}/renew`: a new expiry, `ttl_s` from now
    ttl_s: int | None = Field(default=None, gt=0)


class Budget(WireModel):
    """A dispatch's spend ceiling, shared by its whole chain: in a mint's answer, and what a
    client sends in a mint (at least one bound; the server refuses an empty one with 400)."""

    # (The docstring is the OpenAPI document's description. The Python client sends it as a
    # `BudgetBody`, so an empty one raises before it is sent.)

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
    affinity_hit: bool = False
    """Chosen because the account that last served the mint's `affinity` still had room."""
    affinity_miss: PassOver | None = None
    """The account that last served the mint's `affinity` when the mint went elsewhere, and
    why it was not taken (a pass-over code); null on a hit or when nothing served it yet."""


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
