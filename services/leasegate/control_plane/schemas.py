"""Request bodies of the control plane. Unknown fields and wrong types are 400 invalid-request."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MintBody(Strict):
    tenant: str = Field(pattern=ID_PATTERN)
    dispatch_id: str = Field(pattern=ID_PATTERN)
    model: str = Field(min_length=1, max_length=200)
    role: str | None = Field(default=None, max_length=100)
    ttl_s: int | None = Field(default=None, gt=0)
    retry_of_mint_decision_id: str | None = Field(default=None, max_length=100)
    supersedes_mint_decision_id: str | None = Field(default=None, max_length=100)


class RenewBody(Strict):
    ttl_s: int | None = Field(default=None, gt=0)


class StateBody(Strict):
    state: Literal["enabled", "disabled", "draining"]
    expected_revision: int = Field(ge=0)
    reason: str = Field(min_length=1, max_length=500)
    on_behalf_of: str | None = Field(default=None, max_length=200)
