"""`GET /control/v2/usage`: tokens, cost and requests from evidence, grouped and paged.

    since, until   ISO instants with a zone; default: today (UTC) so far
    group_by       comma-separated subset of tenant, account, model, day (default account,model)
    limit, offset  a page of groups (limit 1..1000, default 100)

Costs are decimal strings in the accounts file's `currency`; a group none of whose rows had a
price has `cost: null`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, cast

from fastapi import APIRouter, Query

from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.usage import GROUPINGS, Grouping, UsageGroup, UsageReader
from leasegate.spend import period_start
from leasegate.wire import UsageGroup as UsageGroupView
from leasegate.wire import UsageReport

DEFAULT_GROUPS = "account,model"


@dataclass(frozen=True, slots=True)
class UsageDeps:
    """What the usage read uses: the evidence's sums, the clock (today's default window) and
    the accounts file's currency."""

    usage: UsageReader
    clock: Clock
    currency: str | None


def usage_router(deps: UsageDeps) -> APIRouter:
    router = APIRouter()

    @router.get("/usage")
    async def usage(
        since: Annotated[str | None, Query(max_length=64)] = None,
        until: Annotated[str | None, Query(max_length=64)] = None,
        group_by: Annotated[str, Query(max_length=64)] = DEFAULT_GROUPS,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> UsageReport:
        return await usage_report(deps, since, until, group_by, limit=limit, offset=offset)

    return router


async def usage_report(
    deps: UsageDeps,
    since: str | None = None,
    until: str | None = None,
    group_by: str = DEFAULT_GROUPS,
    *,
    limit: int = 100,
    offset: int = 0,
) -> UsageReport:
    """One page of groups of the window (today so far by default); `invalid-request` for a
    window that ends before it starts, an instant without a zone or an unknown grouping."""
    now = deps.clock.now()
    start = instant(since, "since") if since else period_start(now, "day")
    end = instant(until, "until") if until else now + timedelta(microseconds=1)
    if end <= start:
        raise GatewayError("invalid-request", "until must be after since")
    groups = groupings(group_by)
    found = await deps.usage.usage(start, end, groups, limit=limit, offset=offset)
    return UsageReport(
        since=start,
        until=end,
        group_by=groups,
        currency=deps.currency,
        usage=tuple(usage_view(group) for group in found),
        next_offset=offset + limit if len(found) == limit else None,
    )


def usage_view(group: UsageGroup) -> UsageGroupView:
    """The group's keys (only those grouped by), its counts and its cost."""
    return UsageGroupView(
        **group.keys,
        requests=group.requests,
        input_tokens=group.input_tokens,
        output_tokens=group.output_tokens,
        cache_read_input_tokens=group.cache_read_input_tokens,
        cache_creation_input_tokens=group.cache_creation_input_tokens,
        cost=group.cost,
        estimated_requests=group.estimated_requests,
    )


def groupings(raw: str) -> tuple[Grouping, ...]:
    names = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = [name for name in names if name not in GROUPINGS]
    if unknown or len(set(names)) != len(names):
        raise GatewayError(
            "invalid-request", f"group_by takes distinct names from {', '.join(GROUPINGS)}"
        )
    return cast("tuple[Grouping, ...]", names)


def instant(raw: str, name: str) -> datetime:
    """An ISO 8601 instant with a zone; a bare number or a naive time is refused."""
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise GatewayError("invalid-request", f"{name} must be an ISO 8601 instant") from None
    if value.tzinfo is None:
        raise GatewayError("invalid-request", f"{name} must carry a timezone (e.g. ...Z)")
    return value.astimezone(UTC)
