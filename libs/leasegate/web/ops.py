"""`/healthz`, `/readyz` and `/metrics`, the same on both services."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from leasegate.accounts import Registry

Probe = Callable[[], Awaitable[None]]
"""Raises when its dependency is unreachable."""

Report = Callable[[], Awaitable[Mapping[str, Any]]]
"""Extra facts for /readyz's body that do not affect readiness (e.g. the audit chain)."""

Refresh = Callable[[], Awaitable[None]]
"""Brings gauges up to date just before a scrape."""

# Which failures a probe may report: connection and protocol errors of the stores.
PROBE_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, ConnectionError)


def ops_router(
    probes: Mapping[str, Probe],
    registry: CollectorRegistry,
    *,
    report: Report | None = None,
    refresh: Sequence[Refresh] = (),
    probe_errors: tuple[type[BaseException], ...] = PROBE_ERRORS,
    accounts: Registry | None = None,
) -> APIRouter:
    """`accounts`: when given, /readyz lists the accounts whose credential variable is unset
    (ready all the same: the others serve; those are never selected)."""
    unconfigured = unconfigured_accounts(accounts) if accounts is not None else None
    router = APIRouter()

    @router.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        checks: dict[str, str] = {}
        for name, probe in probes.items():
            try:
                await probe()
                checks[name] = "ok"
            except probe_errors as exc:
                checks[name] = f"unreachable: {type(exc).__name__}"
        ready = all(v == "ok" for v in checks.values())
        body: dict[str, Any] = {"status": "ready" if ready else "unready", "checks": checks}
        if unconfigured is not None:
            body["unconfigured_accounts"] = unconfigured
        if report is not None:
            body.update(await report())
        return JSONResponse(body, status_code=200 if ready else 503)

    @router.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        for bring_up_to_date in refresh:
            await bring_up_to_date()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router


def unconfigured_accounts(accounts: Registry) -> list[dict[str, str]]:
    """Accounts whose credential variable is unset or empty: the names, never a value."""
    return [
        {"account": a.id, "variable": a.credential_env}
        for a in accounts.accounts
        if not a.configured
    ]
