"""`leasegate`: dev | control-plane | proxy | migrate | evidence prune, and the operator
commands `accounts`, `audit`, `tenants` and `usage` (leasegate.cli.admin), which talk to a
running control plane.

Every command but the operator commands validates the whole configuration first and exits 2
with one line when it is wrong (the operator commands read only their token and `--url`: the
server they talk to has validated its own settings); servers log JSON lines to stderr and
drain on SIGTERM (a clean stop exits 0).
`migrate` exits 1 with one line when the database cannot be reached or does not exist.

Each command imports what it runs when it runs: a proxy process never loads the control
plane, the console or Alembic (resident memory is per process, and a proxy runs many).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import SecretStr

from leasegate.cli.admin import ADMIN_COMMANDS, add_admin_commands, run_admin
from leasegate.cli.demo import DEMO_PORT, demo_banner, demo_defaults, serve_with_demo
from leasegate.cli.evidence import EVIDENCE_COMMAND, add_evidence_commands, run_evidence
from leasegate.config import Config, ConfigError, load_config
from leasegate.web.startup import prepare_process, with_access_log

DEV_PORT = 8080


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ADMIN_COMMANDS:
        return run_admin(args)  # a client of the admin API: the server's settings do not apply
    try:
        if args.command == "dev" and args.demo:
            with tempfile.TemporaryDirectory(prefix="leasegate-demo-") as workdir:
                return _run_demo(args, Path(workdir))
        return _run(args, load_config())
    except ConfigError as exc:
        sys.stderr.write(f"leasegate: configuration error: {exc}\n")
        return 2


def _migrate(config: Config) -> int:
    from leasegate.db.migrate import MigrationError, upgrade

    try:
        upgrade(config.settings.database_url)
    except MigrationError as exc:
        sys.stderr.write(f"leasegate migrate: {exc}\n")
        return 1
    return 0


def _run(args: argparse.Namespace, config: Config) -> int:
    prepare_process(config)
    if args.command == "migrate":
        return _migrate(config)
    if args.command == EVIDENCE_COMMAND:
        return run_evidence(args, config)
    if args.command == "dev":
        from leasegate.cli.dev import create_dev_app
        from leasegate.web.serve import serve

        if args.workers != 1:
            raise ConfigError("--workers: `dev` runs one process (its stores live in it)")
        if config.settings.control_token is None:
            token = secrets.token_urlsafe(24)
            config = load_config(control_token=SecretStr(token))
            sys.stderr.write(f"leasegate dev: generated control token: {token}\n")
        port = args.port if args.port is not None else DEV_PORT
        return serve(with_access_log(create_dev_app(config), config), config, args.host, port)
    # each deployable's own composition root, imported only when it runs: a proxy process
    # never loads the control plane, the console or Alembic
    if args.command == "control-plane":
        from leasegate.control_plane import main as control_plane

        port = args.port if args.port is not None else control_plane.DEFAULT_PORT
        return control_plane.run(config, args.host, port, args.workers)
    from leasegate.proxy import main as proxy

    port = args.port if args.port is not None else proxy.DEFAULT_PORT
    return proxy.run(config, args.host, port, args.workers)


def _run_demo(args: argparse.Namespace, workdir: Path) -> int:
    from leasegate.cli.dev import create_dev_app

    defaults = demo_defaults(args.demo_port, workdir)
    config = load_config(defaults=defaults)
    prepare_process(config)
    if args.workers != 1:
        raise ConfigError("--workers: `dev` runs one process (its stores live in it)")
    port = args.port if args.port is not None else DEV_PORT
    url = f"http://{args.host}:{port}"
    banner = demo_banner(url, args.demo_port, config, defaults["LEASEGATE_DATABASE_URL"])
    sys.stderr.write(banner)
    app = with_access_log(create_dev_app(config), config)
    return serve_with_demo(app, config, args.host, port, args.demo_port)


def _version() -> str:
    try:
        return version("leasegate")
    except PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leasegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"leasegate {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, summary in (
        ("dev", "both APIs on one port, embedded stores, migrates itself"),
        ("control-plane", "the control plane (production mode)"),
        ("proxy", "the data-plane proxy (production mode)"),
    ):
        command = commands.add_parser(name, help=summary)
        command.add_argument("--host", default="127.0.0.1")
        command.add_argument("--port", type=int, default=None)
        command.add_argument(
            "--workers",
            type=int,
            default=1,
            help="processes serving one port (control-plane and proxy; dev runs one)",
        )
        if name == "dev":
            command.add_argument(
                "--demo",
                action="store_true",
                help="with the bundled demo upstream, demo accounts and a fresh database",
            )
            command.add_argument("--demo-port", type=int, default=DEMO_PORT)
    commands.add_parser("migrate", help="alembic upgrade head on LEASEGATE_DATABASE_URL")
    add_admin_commands(commands)
    add_evidence_commands(commands)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
