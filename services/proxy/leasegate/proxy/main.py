"""The proxy's composition root: `leasegate-proxy` (and `leasegate proxy`), and the app factory
each `--workers N` process imports (`app`). It imports nothing of the control plane, the
console, SQLAlchemy or Alembic: a proxy-only install (the `leasegate-proxy` distribution) has
none of them."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp

from leasegate.config import Config, ConfigError, Settings, load_config
from leasegate.proxy.app import create_proxy_app
from leasegate.web.serve import command, serve, serve_workers
from leasegate.web.startup import prepare_process, with_access_log

DEFAULT_PORT = 8081


def check(settings: Settings) -> None:
    """What a production proxy needs beyond valid settings; ConfigError otherwise."""
    if settings.redis_url is None:
        raise ConfigError(
            "LEASEGATE_REDIS_URL: required for separate control-plane and proxy processes "
            "(use `leasegate dev` for the single-process embedded mode)"
        )


def run(config: Config, host: str, port: int, workers: int) -> int:
    """Serve the proxy (`config` already validated, the process prepared)."""
    check(config.settings)
    if workers > 1:
        return serve_workers("leasegate.proxy.main:app", workers, config, host, port)
    return serve(with_access_log(create_proxy_app(config), config), config, host, port)


def app() -> ASGIApp:
    """One `--workers N` process's app: it reads the environment the parent validated."""
    config = load_config()
    prepare_process(config)
    return with_access_log(create_proxy_app(config), config)


def main(argv: Sequence[str] | None = None) -> int:
    return command("leasegate-proxy", __doc__, DEFAULT_PORT, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
