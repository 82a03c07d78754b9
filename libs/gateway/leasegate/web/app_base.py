"""What every service's app starts from: the error envelope for every failure, the body size
limit and body idle deadline, and tracing when configured. One place, so the control plane,
the proxy and the embedded gateway cannot drift apart.

`plain_app` is the proxy's: Starlette alone, so a proxy process never imports FastAPI (nor
the pydantic machinery of its routing), and its server spans come from `ServerSpans`. The
FastAPI apps (control plane, embedded gateway) start from
`leasegate.control_plane.api_app.base_app`, which calls `guard` too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from leasegate.config import Config
from leasegate.web.body_limit import BodyLimitMiddleware
from leasegate.web.errors import install_error_handlers
from leasegate.web.tracing import configure_tracing

PlainLifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


def guard(app: Starlette, config: Config) -> None:
    """The error envelopes and the body limit, on any app (FastAPI's included)."""
    install_error_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=config.settings.max_body_bytes,
        idle_timeout_s=config.settings.body_idle_timeout_s,
        total_timeout_s=config.settings.body_total_timeout_s,
    )


def plain_app(
    config: Config, *, service: str, lifespan: PlainLifespan, routes: Sequence[BaseRoute]
) -> Starlette:
    """A Starlette app with `routes`: no trailing-slash redirects, the same refusals as the
    FastAPI apps, and (only when tracing is configured) a server span per request."""
    configure_tracing(config.tracing_endpoint, service)
    app = Starlette(routes=list(routes), lifespan=lifespan)
    app.router.redirect_slashes = False
    guard(app, config)
    if config.tracing_endpoint is not None:
        from leasegate.web.server_spans import ServerSpans  # only a traced proxy loads it

        app.add_middleware(ServerSpans)  # outermost of ours: its span covers the refusals
    return app
