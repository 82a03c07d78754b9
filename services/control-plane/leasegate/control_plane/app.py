"""The control plane as an app: its runtime, its routes, and its lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from leasegate.config import Config
from leasegate.control_plane.api_app import base_app
from leasegate.control_plane.console.routes import install_console
from leasegate.control_plane.metrics import CapacityGauges
from leasegate.control_plane.mint_metrics import MintMetrics
from leasegate.control_plane.openapi import install_openapi
from leasegate.control_plane.routes import control_router
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.control_plane.stores import Stores, open_stores
from leasegate.control_plane.tenant_metrics import TenantBudgetGauges
from leasegate.core.clock import Clock, SystemClock
from leasegate.db.evidence_upkeep import EvidenceUpkeep
from leasegate.db.partitions import EvidencePartitions
from leasegate.web.auth import TokenAuthority
from leasegate.web.health_metrics import HealthGauges
from leasegate.web.ops import ops_routes, store_probes
from leasegate.web.quota_metrics import QuotaGauges
from leasegate.web.store_metrics import StoreMetrics


def build_control_runtime(
    config: Config, stores: Stores, clock: Clock, metrics_registry: CollectorRegistry
) -> ControlRuntime:
    settings = config.settings
    return ControlRuntime(
        settings=settings,
        registry=config.registry,
        clock=clock,
        stores=stores,
        auth=TokenAuthority(settings.control_token, settings.admin_tokens),
        mint_metrics=MintMetrics(metrics_registry, tenant_label=settings.metrics_tenant_label),
    )


def evidence_upkeep(config: Config, stores: Stores, clock: Clock) -> EvidenceUpkeep:
    """Partitions ahead and retention, run in the background by every control plane."""
    partitions = EvidencePartitions(stores.database)
    return EvidenceUpkeep(partitions, clock, config.settings.evidence_retention_days)


def install_control_plane(
    app: FastAPI, runtime: ControlRuntime, config: Config, metrics_registry: CollectorRegistry
) -> None:
    """The control plane's surface on `app`: its API, the gauges /metrics refreshes, /healthz,
    /readyz, the console and the OpenAPI document. Its own process and `leasegate dev` both
    mount it here, so the two cannot drift apart."""
    stores = runtime.stores
    health_gauges = HealthGauges(metrics_registry, config.registry, stores.health, runtime.clock)
    capacity_gauges = CapacityGauges(runtime.accounts, metrics_registry)
    tenant_gauges = TenantBudgetGauges(runtime.tenant_reads, metrics_registry)
    quota_gauges = QuotaGauges(metrics_registry, config.registry, stores.quota, runtime.clock)
    app.include_router(control_router(runtime.routes))
    app.router.routes.extend(
        ops_routes(
            store_probes(stores),
            metrics_registry,
            refresh=(
                health_gauges.refresh,
                capacity_gauges.refresh,
                tenant_gauges.refresh,
                quota_gauges.refresh,
            ),
            report=runtime.overlay.report,
            accounts=config.registry,
        )
    )
    install_console(app, runtime.console)
    install_openapi(app)


def create_control_plane_app(config: Config, clock: Clock | None = None) -> FastAPI:
    """The control plane as its own process (production mode)."""
    the_clock = clock or SystemClock()
    stores = open_stores(config)
    metrics_registry = CollectorRegistry()
    StoreMetrics(metrics_registry).watch(stores)
    runtime = build_control_runtime(config, stores, the_clock, metrics_registry)
    upkeep = evidence_upkeep(config, stores, the_clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        upkeep.start()
        runtime.reconciler.start()
        runtime.lease_rates.start()
        try:
            yield
        finally:
            await runtime.lease_rates.stop()
            await runtime.reconciler.stop()
            await upkeep.stop()
            await stores.aclose()

    app = base_app(
        config,
        title="Leasegate control plane",
        service="leasegate-control-plane",
        lifespan=lifespan,
    )
    install_control_plane(app, runtime, config, metrics_registry)
    app.state.runtime = runtime
    return app
