"""App factories for `--workers N`: each worker process builds its own app from the
environment (uvicorn imports these by name in every worker)."""

from __future__ import annotations

from starlette.types import ASGIApp

from leasegate.config import load_config
from leasegate.control_plane.app import create_control_plane_app
from leasegate.proxy.app import create_proxy_app
from leasegate.web.logs import configure_logging


def proxy_app() -> ASGIApp:
    config = load_config()
    configure_logging(config.settings.log_level)
    return create_proxy_app(config)


def control_plane_app() -> ASGIApp:
    config = load_config()
    configure_logging(config.settings.log_level)
    return create_control_plane_app(config)
