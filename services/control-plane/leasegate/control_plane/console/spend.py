"""The console's Spend page: today's and this month's usage per tenant, account and
model (the usage read `GET /control/v2/usage` serves), the tenant budgets (bound, spent,
fraction, period end, as `GET /control/v2/tenants` serves them) and spend per day this month
as an inline SVG chart. An operator sets or clears a tenant's budget here with the API's own
validation and audit record (`budget_change.change_budget`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from leasegate.control_plane.budget_change import change_budget
from leasegate.control_plane.console.charts import HEIGHT, WIDTH, bars
from leasegate.control_plane.console.deps import ConsoleDeps
from leasegate.control_plane.console.web import (
    ConsoleAuth,
    acting_form,
    console_router,
    message,
    page,
)
from leasegate.control_plane.tenant_views import budgets_view
from leasegate.control_plane.usage import usage_view
from leasegate.core.errors import GatewayError
from leasegate.core.ids import DISPATCH_PART
from leasegate.core.ports.usage import Grouping, UsageReader
from leasegate.spend import period_start
from leasegate.wire import TenantBudgetBody

_GROUPS: tuple[tuple[Grouping, str], ...] = (
    ("tenant", "Tenant"),
    ("account", "Account"),
    ("model", "Model"),
)
_ROWS = 100


def spend_pages(deps: ConsoleDeps, auth: ConsoleAuth) -> APIRouter:
    router = console_router()

    @router.get("/spend")
    async def spend(request: Request, done: int | None = None) -> Response:
        session = await auth.session(request)
        now = deps.clock.now()
        end = now + timedelta(microseconds=1)
        day, month = period_start(now, "day"), period_start(now, "month")
        tables = []
        for grouping, label in _GROUPS:
            tables.append(
                {
                    "key": grouping,
                    "label": label,
                    "today": await _usage(deps.usage, day, end, grouping),
                    "month": await _usage(deps.usage, month, end, grouping),
                }
            )
        per_day = await deps.usage.usage(month, end, ("day",), limit=31)
        points = [
            (str(g.keys["day"]), float(g.cost) if g.cost is not None else 0.0) for g in per_day
        ]
        tokens = [(str(g.keys["day"]), float(g.input_tokens + g.output_tokens)) for g in per_day]
        priced = any(g.cost is not None for g in per_day)
        budgets = await budgets_view(deps.tenants.reads)
        record = None
        if done is not None:
            _, snapshot = await deps.overlay.read_full()
            record = next((r for r in snapshot.records if r.seq == done), None)
        context = {
            "nav": "spend",
            "budgets": budgets,
            "done": record,
            "tables": tables,
            "chart": bars(points if priced else tokens),
            "chart_unit": deps.registry.currency if priced else "tokens",
            "chart_size": (WIDTH, HEIGHT),
            "today": day.date().isoformat(),
            "month": month.strftime("%Y-%m"),
        }
        return page(request, "spend.html", context, session=session)

    @router.post("/spend/budget")
    async def budget(request: Request) -> Response:
        form = await acting_form(auth, request, "change a tenant budget")
        if isinstance(form, Response):
            return form
        session, fields = form
        tenant = fields.get("tenant", "").strip()
        body = budget_body(fields)
        if not DISPATCH_PART.fullmatch(tenant) or isinstance(body, str):
            problem = body if isinstance(body, str) else "Tenant: letters, digits, ._:/@-."
            return message(request, session, 400, "Not done", problem)
        try:
            record = await change_budget(
                deps.tenants.overlay, deps.tenants.reconciler, tenant, body, session.name
            )
        except GatewayError as error:
            return message(request, session, error.status, "Not done", error.message)
        return RedirectResponse(f"/console/spend?done={record.seq}", status_code=303)

    return router


def budget_body(fields: dict[str, str]) -> TenantBudgetBody | str:
    """The form as the API's body (the same validation), or what is wrong with it."""
    clearing = fields.get("action") == "clear"
    data = {"expected_revision": fields.get("revision", ""), "reason": fields.get("reason", "")}
    if clearing:
        data["clear"] = "true"
    else:
        data["period"] = fields.get("period", "")
        for bound in ("max_tokens", "max_cost"):
            if value := fields.get(bound, "").strip():
                data[bound] = value
    try:
        return TenantBudgetBody.model_validate_strings(data)
    except ValidationError as error:
        return "; ".join(_problem(e) for e in error.errors(include_url=False))


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"])
    text = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {text}" if where else text


async def _usage(
    usage: UsageReader, since: datetime, until: datetime, grouping: Grouping
) -> list[dict[str, Any]]:
    found = await usage.usage(since, until, (grouping,), limit=_ROWS)
    return [usage_view(group).model_dump(mode="json") for group in found]
