"""The data-plane proxy: routes, and the process-level start and stop of its parts.

Its app is Starlette alone (`leasegate.web.app_base.plain_app`): a proxy process never
imports FastAPI. The embedded gateway (`leasegate.cli.dev`) puts the same routes and data
plane on its FastAPI app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio.lowlevel
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from leasegate.config import Config
from leasegate.core.clock import Clock, SystemClock
from leasegate.kv.slot_keeper import SlotKeeper
from leasegate.proxy.asgi import DataPlane
from leasegate.proxy.evidence import EvidenceSink
from leasegate.proxy.evidence_metrics import EvidenceMetrics
from leasegate.proxy.evidence_spill import open_spill
from leasegate.proxy.health_view import HealthView
from leasegate.proxy.keys import KeyResolver
from leasegate.proxy.metrics import ProxyMetrics
from leasegate.proxy.models import list_models, retrieve_model
from leasegate.proxy.quota_view import QuotaView
from leasegate.proxy.runtime import InFlight, ProxyRuntime
from leasegate.proxy.spend import SpendGate
from leasegate.proxy.stores import open_proxy_stores
from leasegate.proxy.tenant_budgets import TenantBudgetWatch
from leasegate.upstream.clients import UpstreamClients
from leasegate.web.app_base import plain_app
from leasegate.web.health_metrics import HealthGauges
from leasegate.web.ops import ops_routes, store_probes
from leasegate.web.quota_metrics import QuotaGauges
from leasegate.web.spend_totals import SpendTotals, settle_seconds
from leasegate.web.store_metrics import StoreMetrics
from leasegate.web.wiring import ProxyStores

if TYPE_CHECKING:
    from leasegate.proxy.spans import RequestTracer


def _request_tracer() -> RequestTracer:
    """Only a traced proxy loads OpenTelemetry (proxy/spans.py)."""
    from leasegate.proxy.spans import RequestTracer

    return RequestTracer()


def build_proxy_runtime(
    config: Config, stores: ProxyStores, metrics_registry: CollectorRegistry, clock: Clock
) -> ProxyRuntime:
    """The proxy's parts over `stores`; they reach the database only through its ports
    (`stores.durable`: key reads, evidence writes, the audit chain's reads), which on Postgres
    run without SQLAlchemy."""
    settings = config.settings
    return ProxyRuntime(
        settings=settings,
        registry=config.registry,
        clock=clock,
        resolver=KeyResolver(
            stores.durable,
            clock,
            settings.key_cache_ttl_s,
            fanout=stores.revocations,
        ),
        clients=UpstreamClients(config.registry, config.credentials, settings),
        health=HealthView(stores.health, stores.health_fanout, config.registry, clock),
        quota=QuotaView(
            stores.quota,
            config.registry,
            clock,
            news=stores.health_fanout,
            probe_requests=settings.quota_probe_requests,
        ),
        slots=SlotKeeper(stores.slots, clock),
        evidence=EvidenceSink(
            stores.durable,
            flush_interval_s=settings.evidence_flush_interval_s,
            linger_s=settings.evidence_linger_s,
            memory_rows=settings.evidence_memory_rows,
            durable_timeout_s=settings.evidence_durable_timeout_s,
            spill=open_spill(settings.evidence_spill_dir, settings.database_url),
            metrics=EvidenceMetrics(metrics_registry),
        ),
        metrics=ProxyMetrics(metrics_registry),
        spend=SpendGate(
            config.registry,
            SpendTotals(
                stores.spend,
                stores.durable,
                config.registry,
                clock,
                settle_seconds(settings.evidence_written_within_s),
            ),
            keep_s=settings.key_max_ttl_s,
            tenants=TenantBudgetWatch(
                stores.durable, settings.audit_key, clock, witness=stores.witness
            ),
            clock=clock,
        ),
        tracer=_request_tracer() if config.tracing_endpoint is not None else None,
        in_flight=InFlight(settings.max_in_flight),
    )


async def start_proxy(runtime: ProxyRuntime, stores: ProxyStores) -> None:
    await anyio.lowlevel.checkpoint()  # anyio's asyncio backend loads now, not in a stream's relay
    await stores.revocations.subscribe(runtime.resolver.on_revoked, runtime.resolver.on_reset)
    await runtime.health.start()
    await runtime.quota.start()
    runtime.evidence.start()
    runtime.slots.start()
    runtime.resolver.start()


async def stop_proxy(runtime: ProxyRuntime) -> None:
    await runtime.resolver.stop()
    await runtime.slots.stop()
    await runtime.health.stop()
    await runtime.quota.stop()
    await runtime.evidence.stop(runtime.settings.shutdown_drain_s)
    await runtime.clients.aclose()


def proxy_routes(runtime: ProxyRuntime) -> list[Route]:
    """The proxy's routes that go through the framework (the proxied endpoints do not: see
    asgi.py)."""

    async def models(request: Request) -> Response:
        return await list_models(runtime, request)

    async def model(request: Request) -> Response:
        return await retrieve_model(runtime, request)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
    ]


def with_data_plane(runtime: ProxyRuntime, app: Starlette, *, traced: bool) -> DataPlane:
    """`app` (the proxy's Starlette app, or the embedded gateway's FastAPI one) behind the
    data plane: proxied `POST`s skip the framework, unless requests are traced (the app
    makes the server spans: `ServerSpans` on the proxy, FastAPI's telemetry embedded)."""
    plane = DataPlane(runtime, app, bypass=not traced)
    app.router.routes.extend(plane.routes())
    return plane


def create_proxy_app(config: Config, clock: Clock | None = None) -> DataPlane:
    """The proxy as its own process (production mode)."""
    the_clock = clock or SystemClock()
    stores = open_proxy_stores(config)
    metrics_registry = CollectorRegistry()
    store_metrics = StoreMetrics(metrics_registry)
    store_metrics.watch(stores)
    store_metrics.watch_revocations(stores.revocations)
    runtime = build_proxy_runtime(config, stores, metrics_registry, the_clock)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await start_proxy(runtime, stores)
        try:
            yield
        finally:
            await stop_proxy(runtime)
            await stores.aclose()

    gauges = HealthGauges(metrics_registry, config.registry, stores.health, the_clock)
    quota_gauges = QuotaGauges(metrics_registry, config.registry, stores.quota, the_clock)
    ops = ops_routes(
        store_probes(stores),
        metrics_registry,
        refresh=(gauges.refresh, quota_gauges.refresh),
        accounts=config.registry,
    )
    app = plain_app(
        config, service="leasegate-proxy", lifespan=lifespan, routes=[*proxy_routes(runtime), *ops]
    )
    app.state.runtime = runtime
    app.state.stores = stores
    return with_data_plane(runtime, app, traced=config.tracing_endpoint is not None)
