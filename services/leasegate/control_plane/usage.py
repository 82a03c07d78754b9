"""`GET /control/v2/usage`: tokens, cost and requests from evidence, grouped and paged.

    since, until   ISO instants with a zone; default: today (UTC) so far
    group_by       comma-separated subset of tenant, account, model, day (default account,model)
    limit, offset  a page of groups (limit 1..1000, default 100)

Costs are decimal strings in the accounts file's `currency`; a group none of whose rows had a
price has `cost: null`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, cast

from fastapi import APIRouter, Query

from leasegate.core.errors import GatewayError
from leasegate.db.usage import GROUPINGS, Grouping, UsageGroup
from leasegate.wire import UsageGroup as UsageGroupView
from leasegate.wire import UsageReport

if TYPE_CHECKING:  # the runtime holds a SpendToday: a runtime import would be circular
    from leasegate.control_plane.runtime import ControlRuntime

_DEFAULT_GROUPS = "account,model"


def usage_router(runtime: ControlRuntime) -> APIRouter:
    router = APIRouter()

    @router.get("/usage")
    async def usage(
        since: Annotated[str | None, Query(max_length=64)] = None,
        until: Annotated[str | None, Query(max_length=64)] = None,
        group_by: Annotated[str, Query(max_length=64)] = _DEFAULT_GROUPS,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> UsageReport:
        now = runtime.clock.now()
        start = instant(since, "since") if since else start_of_day(now)
        end = instant(until, "until") if until else now + timedelta(microseconds=1)
        if end <= start:
            raise GatewayError("invalid-request", "until must be after since")
        groups = groupings(group_by)
        found = await runtime.stores.store.usage(start, end, groups, limit=limit, offset=offset)
        return UsageReport(
            since=start,
            until=end,
            group_by=groups,
            currency=runtime.registry.currency,
            usage=tuple(usage_view(group) for group in found),
            next_offset=offset + limit if len(found) == limit else None,
        )

    return router


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


def start_of_day(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class SpendToday:
    """Each account's usage since midnight UTC, for the accounts view: summed at most once per
    `max_age_s` (a busy day has millions of rows; the view is polled)."""

    def __init__(self, max_age_s: float = 30.0) -> None:
        self._max_age_s = max_age_s
        self._cached: tuple[float, datetime, dict[str | None, UsageGroup]] | None = None

    async def by_account(self, runtime: ControlRuntime) -> dict[str | None, UsageGroup]:
        now = runtime.clock.now()
        day = start_of_day(now)
        cached = self._cached
        if (
            cached is not None
            and cached[1] == day
            and runtime.clock.monotonic() - cached[0] < self._max_age_s
        ):
            return cached[2]
        found = await runtime.stores.store.usage(
            day, now + timedelta(microseconds=1), ("account",), limit=10_000
        )
        totals = {group.keys["account"]: group for group in found}
        self._cached = (runtime.clock.monotonic(), day, totals)
        return totals
