"""`leasegate dev --demo`: the gateway with its bundled demo, from any directory.

The demo upstream (leasegate.demo.upstream) runs in the same process on `--demo-port`; the
bundled accounts (leasegate.demo.accounts: those whose kind can run here) are pointed at that
port; the demo gets known control and admin tokens and a placeholder credential, each only
where the environment does not set its own. Unless LEASEGATE_DATABASE_URL is set, the database is a
fresh SQLite file in a temporary directory removed at exit, so every start is a fresh demo.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.types import ASGIApp

from leasegate.config import Config
from leasegate.web.serve import server

DEMO_CONTROL_TOKEN = "dev-control-token"  # noqa: S105 - the demo's published token
DEMO_ADMIN_NAME = "demo"
DEMO_ADMIN_TOKEN = "demo-admin-token"  # noqa: S105 - the demo's published token
DEMO_CREDENTIAL = "demo-placeholder-credential"
DEMO_PORT = 8090


def demo_accounts_text(port: int) -> str:
    """The bundled demo accounts that can run here, pointed at the demo upstream's port."""
    from leasegate.demo.accounts import demo_accounts  # only `--demo` loads the demo

    return demo_accounts(port)


def demo_defaults(port: int, workdir: Path) -> dict[str, str]:
    """Variables the demo uses where the environment has none (see load_config(defaults=))."""
    accounts = workdir / "accounts.yaml"
    accounts.write_text(demo_accounts_text(port), encoding="utf-8")
    return {
        "LEASEGATE_ACCOUNTS_FILE": str(accounts),
        "LEASEGATE_CRED_DEMO": DEMO_CREDENTIAL,
        "LEASEGATE_CONTROL_TOKEN": DEMO_CONTROL_TOKEN,
        "LEASEGATE_ADMIN_TOKENS": f"{DEMO_ADMIN_NAME}={DEMO_ADMIN_TOKEN}",
        "LEASEGATE_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'demo.db'}",
    }


def demo_banner(url: str, port: int, config: Config, fresh_database_url: str) -> str:
    """What a newcomer needs to paste the README's commands. Only the demo's own published
    tokens are printed; a token the operator set is named, never shown."""
    settings = config.settings
    control_token = settings.control_token
    control = (
        DEMO_CONTROL_TOKEN
        if control_token is not None and control_token.get_secret_value() == DEMO_CONTROL_TOKEN
        else "yours, from LEASEGATE_CONTROL_TOKEN"
    )
    admin_token = settings.admin_tokens.get(DEMO_ADMIN_NAME)
    admin = (
        f"{DEMO_ADMIN_TOKEN}  (export LEASEGATE_ADMIN_TOKEN={DEMO_ADMIN_TOKEN} for "
        "`leasegate accounts list` and `leasegate audit verify`)"
        if admin_token is not None and admin_token.get_secret_value() == DEMO_ADMIN_TOKEN
        else "yours, from LEASEGATE_ADMIN_TOKENS"
    )
    database = (
        "a fresh SQLite file, deleted at exit: every start is a fresh demo"
        if settings.database_url == fresh_database_url
        else "LEASEGATE_DATABASE_URL (yours: kept between runs)"
    )
    return (
        f"leasegate demo: {url}\n"
        f"  demo upstream: http://127.0.0.1:{port}\n"
        f"  control token: {control}\n"
        f"  admin token:   {admin}\n"
        f"  database:      {database}\n"
    )


def serve_with_demo(app: ASGIApp, config: Config, host: str, port: int, demo_port: int) -> int:
    """Serve `app` with the demo upstream listening on `demo_port` in the same event loop. The
    demo upstream is imported here, so only `leasegate dev --demo` loads it."""
    from leasegate.demo.upstream import MockUpstream

    gateway = server(app, config, host, port)

    async def both() -> None:
        upstream = MockUpstream()
        await upstream.start("127.0.0.1", demo_port)
        try:
            await gateway.serve()
        finally:
            await upstream.stop()

    asyncio.run(both())
    return 0 if gateway.started else 3
