"""Embedded mode: both APIs in one process on one port, sharing one set of stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from leasegate.config import Config
from leasegate.control_plane.api_app import base_app
from leasegate.control_plane.app import (
    build_control_runtime,
    evidence_upkeep,
    install_control_plane,
)
from leasegate.control_plane.stores import open_stores
from leasegate.core.clock import Clock, SystemClock
from leasegate.db.migrate import upgrade
from leasegate.proxy.app import (
    build_proxy_runtime,
    proxy_routes,
    start_proxy,
    stop_proxy,
    with_data_plane,
)
from leasegate.proxy.asgi import DataPlane
from leasegate.web.store_metrics import StoreMetrics


def create_dev_app(
    config: Config, clock: Clock | None = None, *, migrate: bool = True
) -> DataPlane:
    the_clock = clock or SystemClock()
    stores = open_stores(config)
    metrics_registry = CollectorRegistry()
    store_metrics = StoreMetrics(metrics_registry)
    store_metrics.watch(stores)
    store_metrics.watch_revocations(stores.revocations)
    control = build_control_runtime(config, stores, the_clock, metrics_registry)
    proxy = build_proxy_runtime(config, stores, metrics_registry, the_clock)
    upkeep = evidence_upkeep(config, stores, the_clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if migrate:
            await asyncio.to_thread(upgrade, config.settings.database_url)
        await start_proxy(proxy, stores)
        upkeep.start()
        control.reconciler.start()
        control.lease_rates.start()
        try:
            yield
        finally:
            await control.lease_rates.stop()
            await control.reconciler.stop()
            await upkeep.stop()
            await stop_proxy(proxy)
            await stores.aclose()

    app = base_app(config, title="Leasegate (embedded)", service="leasegate", lifespan=lifespan)
    install_control_plane(app, control, config, metrics_registry)
    app.router.routes.extend(proxy_routes(proxy))
    app.state.control = control
    app.state.proxy = proxy
    app.state.stores = stores
    return with_data_plane(proxy, app, traced=config.tracing_endpoint is not None)
