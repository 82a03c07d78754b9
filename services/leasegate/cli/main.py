"""`leasegate`: dev | control-plane | proxy | migrate, and the operator commands
`accounts` and `audit` (leasegate.cli.admin), which talk to a running control plane.

Every command validates the whole configuration first and exits 2 with one line when it is
wrong; servers log JSON lines to stderr and drain on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import SecretStr
from starlette.types import ASGIApp

from leasegate.cli.admin import ADMIN_COMMANDS, add_admin_commands, run_admin
from leasegate.cli.dev import create_dev_app
from leasegate.config import Config, ConfigError, load_config
from leasegate.control_plane.app import create_control_plane_app
from leasegate.db.migrate import upgrade
from leasegate.proxy.app import create_proxy_app
from leasegate.web.logs import configure_logging

log = logging.getLogger("leasegate.cli")

_DEFAULT_PORTS = {"dev": 8080, "control-plane": 8080, "proxy": 8081}
_WORKER_HEALTHCHECK_S = 30
_FACTORIES = {
    "control-plane": "leasegate.cli.apps:control_plane_app",
    "proxy": "leasegate.cli.apps:proxy_app",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ADMIN_COMMANDS:
        return run_admin(args)  # a client of the admin API: the server's settings do not apply
    try:
        config = load_config()
        return _run(args, config)
    except ConfigError as exc:
        sys.stderr.write(f"leasegate: configuration error: {exc}\n")
        return 2


def _run(args: argparse.Namespace, config: Config) -> int:
    configure_logging(config.settings.log_level)
    if config.unknown_variables:
        log.warning(
            "unknown LEASEGATE_ variables ignored (a typo?)",
            extra={"variables": list(config.unknown_variables)},
        )
    if args.command == "migrate":
        upgrade(config.settings.database_url)
        return 0
    app: ASGIApp | str
    workers = getattr(args, "workers", 1)
    if args.command == "dev":
        if config.settings.control_token is None:
            token = secrets.token_urlsafe(24)
            config = load_config(control_token=SecretStr(token))
            sys.stderr.write(f"leasegate dev: generated control token: {token}\n")
        app = create_dev_app(config)
    elif args.command == "control-plane":
        _require_production(config, needs_control_token=True)
        app = create_control_plane_app(config) if workers == 1 else _FACTORIES[args.command]
    else:
        _require_production(config, needs_control_token=False)
        app = create_proxy_app(config) if workers == 1 else _FACTORIES[args.command]
    uvicorn.run(
        app,
        # N > 1: N processes accept on the one listening socket, each building its own app
        factory=workers > 1,
        workers=workers if workers > 1 else None,
        # a worker answers the supervisor's ping only once its imports are done: on a busy
        # machine that takes longer than uvicorn's 5 s default, and it would be restarted
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
        host=args.host,
        port=args.port if args.port is not None else _DEFAULT_PORTS[args.command],
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(config.settings.shutdown_drain_s),
        lifespan="on",
        # named, not "auto": a missing one fails at start instead of silently costing CPU
        loop="uvloop",
        http="httptools",
    )
    return 0


def _require_production(config: Config, *, needs_control_token: bool) -> None:
    if config.settings.redis_url is None:
        raise ConfigError(
            "LEASEGATE_REDIS_URL: required for separate control-plane and proxy processes "
            "(use `leasegate dev` for the single-process embedded mode)"
        )
    if needs_control_token and config.settings.control_token is None:
        raise ConfigError("LEASEGATE_CONTROL_TOKEN: required outside dev mode")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leasegate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, summary in (
        ("dev", "both APIs on one port, embedded stores, migrates itself"),
        ("control-plane", "the control plane (production mode)"),
        ("proxy", "the data-plane proxy (production mode)"),
    ):
        command = commands.add_parser(name, help=summary)
        command.add_argument("--host", default="127.0.0.1")
        command.add_argument("--port", type=int, default=None)
        if name != "dev":  # embedded mode's in-process stores live in one process
            command.add_argument(
                "--workers", type=_positive, default=1, help="processes on the one port (1)"
            )
    commands.add_parser("migrate", help="alembic upgrade head on LEASEGATE_DATABASE_URL")
    add_admin_commands(commands)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
