"""The proxy's composition root: `leasegate-proxy` (and `leasegate proxy`), and the app factory
each `--workers N` process imports (`app`). It imports nothing of the control plane, the
console, SQLAlchemy or Alembic: a proxy-only install (the `leasegate-proxy` distribution) has
none of them."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp

from leasegate.config import Config, Settings
from leasegate.proxy.app import create_proxy_app
from leasegate.web.serve import command, require_redis, serve_deployable, worker_app

DEFAULT_PORT = 8081
FACTORY = "leasegate.proxy.main:app"


def check(settings: Settings) -> None:
    """What a production proxy needs beyond valid settings; ConfigError otherwise."""
    require_redis(settings)


def run(config: Config, host: str, port: int, workers: int) -> int:
    """Serve the proxy (`config` already validated, the process prepared)."""
    check(config.settings)
    return serve_deployable(create_proxy_app, FACTORY, config, host, port, workers)


def app() -> ASGIApp:
    return worker_app(create_proxy_app)


def main(argv: Sequence[str] | None = None) -> int:
    return command("leasegate-proxy", __doc__, DEFAULT_PORT, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
