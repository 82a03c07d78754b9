"""Request bodies of the control plane. Unknown fields and wrong types are 400 invalid-request."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BudgetBody(Strict):
    """A dispatch's spend ceiling, shared by its whole chain; at least one bound."""

    max_tokens: int | None = Field(default=None, gt=0, le=2**62)
    max_cost: str | None = Field(default=None, pattern=r"^[0-9]{1,11}(\.[0-9]{1,9})?$")
    """A decimal string in the accounts file's currency, e.g. "1.50" (never a JSON number)."""

    @model_validator(mode="after")
    def _bounded(self) -> BudgetBody:
        if self.max_tokens is None and self.max_cost is None:
            raise ValueError("a budget needs max_tokens, max_cost or both")
        return self

    @property
    def cost(self) -> Decimal | None:
        return Decimal(self.max_cost) if self.max_cost is not None else None


class MintBody(Strict):
    tenant: str = Field(pattern=ID_PATTERN)
    dispatch_id: str = Field(pattern=ID_PATTERN)
    model: str = Field(min_length=1, max_length=200)
    role: str | None = Field(default=None, max_length=100)
    ttl_s: int | None = Field(default=None, gt=0)
    retry_of_mint_decision_id: str | None = Field(default=None, max_length=100)
    supersedes_mint_decision_id: str | None = Field(default=None, max_length=100)
    budget: BudgetBody | None = None


class RenewBody(Strict):
    ttl_s: int | None = Field(default=None, gt=0)


class StateBody(Strict):
    state: Literal["enabled", "disabled", "draining"]
    expected_revision: int = Field(ge=0)
    reason: str = Field(min_length=1, max_length=500)
    on_behalf_of: str | None = Field(default=None, max_length=200)
