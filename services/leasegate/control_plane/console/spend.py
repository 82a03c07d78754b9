"""The console's Spend page: today's and this month's usage per tenant, account and
model (the usage read `GET /control/v2/usage` serves), the tenant budgets (bound, spent,
fraction, period end, as `GET /control/v2/tenants` serves them) and spend per day this month
as an inline SVG chart."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from leasegate.control_plane.console.charts import HEIGHT, WIDTH, bars
from leasegate.control_plane.console.web import ConsoleAuth, page
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.tenant_views import budgets_view
from leasegate.control_plane.usage import start_of_day, usage_view
from leasegate.core.ports.usage import Grouping

_GROUPS: tuple[tuple[Grouping, str], ...] = (
    ("tenant", "Tenant"),
    ("account", "Account"),
    ("model", "Model"),
)
_ROWS = 100


def spend_pages(runtime: ControlRuntime, auth: ConsoleAuth) -> APIRouter:
    router = APIRouter(prefix="/console", include_in_schema=False)

    @router.get("/spend")
    async def spend(request: Request) -> Response:
        session = await auth.session(request)
        now = runtime.clock.now()
        end = now + timedelta(microseconds=1)
        day = start_of_day(now)
        month = day.replace(day=1)
        tables = []
        for grouping, label in _GROUPS:
            tables.append(
                {
                    "key": grouping,
                    "label": label,
                    "today": await _usage(runtime, day, end, grouping),
                    "month": await _usage(runtime, month, end, grouping),
                }
            )
        per_day = await runtime.stores.store.usage(month, end, ("day",), limit=31)
        points = [
            (str(g.keys["day"]), float(g.cost) if g.cost is not None else 0.0) for g in per_day
        ]
        tokens = [(str(g.keys["day"]), float(g.input_tokens + g.output_tokens)) for g in per_day]
        priced = any(g.cost is not None for g in per_day)
        context = {
            "nav": "spend",
            "budgets": await budgets_view(runtime.tenant_reads),
            "tables": tables,
            "chart": bars(points if priced else tokens),
            "chart_unit": runtime.registry.currency if priced else "tokens",
            "chart_size": (WIDTH, HEIGHT),
            "today": day.date().isoformat(),
            "month": month.strftime("%Y-%m"),
        }
        return page(request, "spend.html", context, session=session)

    return router


async def _usage(
    runtime: ControlRuntime, since: datetime, until: datetime, grouping: Grouping
) -> list[dict[str, Any]]:
    found = await runtime.stores.store.usage(since, until, (grouping,), limit=_ROWS)
    return [usage_view(group).model_dump(mode="json") for group in found]
