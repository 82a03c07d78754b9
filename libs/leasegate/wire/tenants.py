"""Tenant budgets on the wire: the budget per period and the spend in the current one."""

from __future__ import annotations

from leasegate.audit.fold import ChainStatus
from leasegate.spend import Period
from leasegate.wire.audit import TenantBudgetRecord
from leasegate.wire.base import Money, Time, WireModel


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
