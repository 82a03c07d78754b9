"""The FastAPI application every service starts from: tracing when configured, the error
envelope for every failure, the body size limit and body idle deadline. One place, so the
control plane, the proxy and the embedded gateway cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI

from leasegate.config import Config
from leasegate.web.body_limit import BodyLimitMiddleware
from leasegate.web.errors import install_error_handlers
from leasegate.web.tracing import configure_tracing, telemetry

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def base_app(
    config: Config, *, title: str, service: str, lifespan: Lifespan, **options: Any
) -> FastAPI:
    configure_tracing(config.tracing_endpoint, service)
    app = FastAPI(
        title=title,
        lifespan=lifespan,
        telemetry=telemetry(config.tracing_endpoint),
        redirect_slashes=False,
        **options,
    )
    install_error_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=config.settings.max_body_bytes,
        idle_timeout_s=config.settings.body_idle_timeout_s,
    )
    return app
