"""`/healthz`, `/readyz` and `/metrics`, the same on both services.

Plain Starlette routes, so the proxy serves them without FastAPI; the control plane adds
them to its FastAPI app as they are, and FastAPI's OpenAPI document lists only its own
(`APIRoute`) routes, so these stay out of it (`include_in_schema=False` says so twice)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from leasegate.accounts import Registry
from leasegate.core.ports.errors import StoreError
from leasegate.schema import SchemaCheck, SchemaNotReady
from leasegate.web.wiring import ProxyStores

Probe = Callable[[], Awaitable[None]]
"""Raises StoreError when its dependency is unreachable."""

Report = Callable[[], Awaitable[Mapping[str, Any]]]
"""Extra facts for /readyz's body that do not affect readiness (e.g. the audit chain)."""

Refresh = Callable[[], Awaitable[None]]
"""Brings gauges up to date just before a scrape."""

PROBE_DEADLINE_S = 3.0
"""Each probe, and the report, runs at most this long, all at once: /readyz answers within
it (well under 5 s) whatever the stores do; a probe past it reads `unreachable`."""


def ops_routes(
    probes: Mapping[str, Probe],
    registry: CollectorRegistry,
    *,
    report: Report | None = None,
    refresh: Sequence[Refresh] = (),
    accounts: Registry | None = None,
) -> list[Route]:
    """`accounts`: when given, /readyz lists the accounts whose credential variable is unset
    (ready all the same: the others serve; those are never selected)."""
    unconfigured = unconfigured_accounts(accounts) if accounts is not None else None

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def facts() -> Mapping[str, Any]:
        if report is None:
            return {}
        try:
            async with asyncio.timeout(PROBE_DEADLINE_S):
                return await report()
        except TimeoutError:
            return {}

    async def readyz(_: Request) -> JSONResponse:
        names = list(probes)
        extra_task = asyncio.ensure_future(facts())
        results = await asyncio.gather(*(_check(probes[n]) for n in names))
        extra = await extra_task
        checks: dict[str, str] = dict(zip(names, results, strict=True))
        ready = all(v == "ok" for v in checks.values())
        body: dict[str, Any] = {"status": "ready" if ready else "unready", "checks": checks}
        if unconfigured is not None:
            body["unconfigured_accounts"] = unconfigured
        body.update(extra)
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(_: Request) -> Response:
        for bring_up_to_date in refresh:
            await bring_up_to_date()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return [
        Route(path, endpoint, methods=["GET"], include_in_schema=False)
        for path, endpoint in (("/healthz", healthz), ("/readyz", readyz), ("/metrics", metrics))
    ]


async def _check(probe: Probe) -> str:
    """`ok`, or why not: `unreachable: <reason>`, or the schema's missing migrations."""
    try:
        async with asyncio.timeout(PROBE_DEADLINE_S):
            await probe()
    except StoreError as exc:
        return f"unreachable: {exc.reason}"
    except SchemaNotReady as exc:
        return str(exc)
    except TimeoutError:
        return "unreachable: TimeoutError"  # past PROBE_DEADLINE_S
    return "ok"


def store_probes(stores: ProxyStores) -> dict[str, Probe]:
    """The stores a process has, for /readyz: the database, its schema (at this release's
    migrations) and, in production mode, Redis (embedded mode has none to report)."""
    probes: dict[str, Probe] = {
        "database": stores.ping_database,
        "schema": SchemaCheck(stores.durable.schema_revisions),
    }
    if stores.redis is not None:
        probes["redis"] = stores.ping_redis
    return probes


def unconfigured_accounts(accounts: Registry) -> list[dict[str, str]]:
    """Accounts whose credential variable is unset or empty: the names, never a value."""
    return [
        {"account": a.id, "variable": a.credential_env}
        for a in accounts.accounts
        if not a.configured
    ]
