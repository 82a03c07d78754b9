"""Tenant budgets on the wire: the budget per period and the spend in the current one; and an
operator's change of one (`TenantBudgetBody`)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from leasegate.core.vocab import ChainStatus, Period
from leasegate.wire.audit import AuditedBody, TenantBudgetRecord
from leasegate.wire.base import Money, Time, WireModel
from leasegate.wire.fields import MaxCost, MaxTokens


class TenantBudget(WireModel):
    period: Period
    max_tokens: int | None
    max_cost: Money | None


class TenantSpent(WireModel):
    period_start: Time
    period_end: Time
    tokens: int
    cost: Money
    fraction: float
    """The larger of tokens/max_tokens and cost/max_cost: 1.0 or more means exhausted."""
    exhausted: bool


class Tenant(WireModel):
    tenant: str
    budget: TenantBudget | None
    spent: TenantSpent | None
    """null with no budget: a tenant is only counted while it has one."""


class Tenants(WireModel):
    """`GET /tenants`: every budgeted tenant."""

    tenants: tuple[Tenant, ...]
    revision: int
    chain: ChainStatus
    currency: str | None
    """The accounts file's `currency`; null when it names none."""


class TenantRead(Tenant):
    """`GET /tenants/{tenant}/budget`."""

    revision: int
    chain: ChainStatus
    currency: str | None
    """The accounts file's `currency`; null when it names none."""


class TenantBudgetChanged(TenantRead):
    """`POST /tenants/{tenant}/budget`: the tenant as it is now, and the record appended."""

    record: TenantBudgetRecord


class TenantBudgetBody(AuditedBody):
    """Set a budget (`period` and at least one bound) or clear it (`clear: true` alone)."""

    period: Literal["day", "month"] | None = None
    max_tokens: MaxTokens | None = None
    max_cost: MaxCost | None = None
    clear: bool = False

    @model_validator(mode="after")
    def _set_or_clear(self) -> TenantBudgetBody:
        bounded = self.max_tokens is not None or self.max_cost is not None
        if self.clear and (bounded or self.period is not None):
            raise ValueError("clear takes no period, max_tokens or max_cost")
        if not self.clear and (self.period is None or not bounded):
            raise ValueError("a budget needs a period and max_tokens, max_cost or both")
        return self
