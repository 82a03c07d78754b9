"""The control plane's composition root: `leasegate-control-plane` (and `leasegate
control-plane`), and the app factory each `--workers N` process imports (`app`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.types import ASGIApp

from leasegate.config import Config, ConfigError, Settings
from leasegate.control_plane.app import create_control_plane_app
from leasegate.web.serve import command, require_redis, serve_deployable, worker_app

DEFAULT_PORT = 8080
FACTORY = "leasegate.control_plane.main:app"

log = logging.getLogger("leasegate.startup")


def check(settings: Settings, workers: int) -> None:
    """What a production control plane needs beyond valid settings; ConfigError otherwise."""
    require_redis(settings)
    if settings.control_token is None:
        raise ConfigError("LEASEGATE_CONTROL_TOKEN: required outside dev mode")
    if workers > 1 and settings.console_secret is None:
        # each worker would sign console sessions with a key of its own: a sign-in made on
        # one is refused by the others, so half the console's requests bounce to sign-in
        raise ConfigError(
            "LEASEGATE_CONSOLE_SECRET: required with --workers > 1 (the same on every "
            "control-plane process, e.g. `openssl rand -hex 32`)"
        )


def run(config: Config, host: str, port: int, workers: int) -> int:
    """Serve the control plane (`config` already validated, the process prepared)."""
    check(config.settings, workers)
    warn_per_process_console_key(config)
    return serve_deployable(create_control_plane_app, FACTORY, config, host, port, workers)


def app() -> ASGIApp:
    return worker_app(create_control_plane_app)


def warn_per_process_console_key(config: Config) -> None:
    """A control plane without LEASEGATE_CONSOLE_SECRET signs console sessions with a key of
    its own: fine for one process, a sign-in loop behind a load balancer over several."""
    if config.settings.console_secret is None:
        log.warning(
            "LEASEGATE_CONSOLE_SECRET is unset: console sessions are valid on this process "
            "only; set the same secret on every control-plane replica"
        )


def main(argv: Sequence[str] | None = None) -> int:
    return command("leasegate-control-plane", __doc__, DEFAULT_PORT, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
