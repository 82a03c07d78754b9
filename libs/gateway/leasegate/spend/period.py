"""Tenant budgets per period: which UTC day or month an instant falls in, and when it ends.

Periods are calendar periods in UTC, half-open `[start, end)`: a day starts at 00:00:00, a
month on its first day at 00:00:00. A refusal's `retry_after_s` is the time left until the
period ends, when the tenant's running total starts again from zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from leasegate.core.vocab import Period
from leasegate.spend.budget import Budget


@dataclass(frozen=True, slots=True)
class TenantBudget:
    """An operator's ceiling on one tenant's spend per UTC period; at least one bound."""

    period: Period
    max_tokens: int | None = None
    max_cost: Decimal | None = None
    """In the accounts file's currency."""

    @property
    def budget(self) -> Budget:
        return Budget(self.max_tokens, self.max_cost)


def period_start(now: datetime, period: Period) -> datetime:
    at = now.astimezone(UTC)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    return day if period == "day" else day.replace(day=1)


def period_end(now: datetime, period: Period) -> datetime:
    start = period_start(now, period)
    if period == "day":
        return start + timedelta(days=1)
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)


def seconds_left(now: datetime, period: Period) -> float:
    """Until the period containing `now` ends: the `retry_after_s` of a tenant refusal."""
    return (period_end(now, period) - now.astimezone(UTC)).total_seconds()


def period_label(now: datetime, period: Period) -> str:
    """`2026-12-01` for a day, `2026-12` for a month: names the period's running total."""
    start = period_start(now, period)
    return start.strftime("%Y-%m-%d") if period == "day" else start.strftime("%Y-%m")


def tenant_total_id(tenant: str, period: Period, now: datetime) -> str:
    """The running total's id in the spend store: one per tenant and period, never a chain's
    (chain ids are decision ids, `md_...`)."""
    return f"tenant:{tenant}:{period}:{period_label(now, period)}"
