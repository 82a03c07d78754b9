"""The wheels are the product: every member of the workspace built from this tree, installed
in fresh virtual environments outside it, and every command run from an unrelated directory,
on SQLite and Postgres. The `leasegate` distribution brings everything; the client installs
alone with no server dependency; the proxy installs alone without FastAPI, SQLAlchemy or
Alembic, and serves.

The wheels are built with `pip wheel` (the build backend is the pinned hatchling of each
member's pyproject.toml) and installed with plain `pip install --find-links`, the third-party
dependencies from the configured index (pip's cache makes a re-run fast).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.cli.demo import DEMO_ADMIN_TOKEN, DEMO_CONTROL_TOKEN
from leasegate.demo.upstream import MockUpstream
from tests.fixtures.databases import create_database, drop_database, pg_url
from tests.fixtures.gateways import ADMIN_TOKEN, CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import leasegate_process
from tests.fixtures.servers import free_port, local_client
from tests.fixtures.services import production_stores, require_service

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    leasegate: Path
    """The console script of the fresh environment."""
    workdir: Path
    """An empty directory outside the source tree, the cwd of every command."""

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LEASEGATE_", "PYTHON", "VIRTUAL_ENV"))
        }
        return {**clean, **(extra or {})}

    def run(
        self, *argv: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - the installed console script, fixed arguments
            [str(self.leasegate), *argv],
            cwd=self.workdir,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    async def arun(
        self, *argv: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # the servers' upstream answers from this test's event loop: never block it
        return await asyncio.to_thread(self.run, *argv, env=env)


def _pip(*argv: str, python: str = sys.executable) -> None:
    subprocess.run(  # noqa: S603 - pip with fixed arguments
        [python, "-m", "pip", *argv], check=True, timeout=600, capture_output=True
    )


MEMBERS = (
    "libs/core",
    "libs/client",
    "libs/gateway",
    "libs/db",
    "services/proxy",
    "services/control-plane",
    "services/demo",
    "services/cli",
)
SERVER_DISTRIBUTIONS = frozenset(
    {"fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "aiosqlite", "asyncpg", "redis"}
    | {"aiohttp", "orjson", "prometheus-client", "pyyaml", "jinja2", "pydantic-settings"}
    | {"leasegate-gateway", "leasegate-db", "leasegate-proxy", "leasegate-control-plane"}
)
"""What a client-only install must not bring."""
CONTROL_PLANE_DISTRIBUTIONS = frozenset(
    {"fastapi", "sqlalchemy", "alembic", "aiosqlite", "jinja2", "leasegate-db"}
    | {"leasegate-control-plane", "leasegate-demo", "leasegate-client", "httpx"}
)
"""What a proxy-only install must not bring."""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("wheels")
    _pip("wheel", "--no-deps", "-q", "-w", str(dist), *(str(REPO_ROOT / m) for m in MEMBERS))
    assert len(list(dist.glob("leasegate*.whl"))) == len(MEMBERS)
    return dist


def _venv(root: Path, wheels: Path, requirement: str) -> Path:
    """A fresh virtual environment with `requirement` installed from the built wheels (and
    its third-party dependencies from the index); its `bin`."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)  # noqa: S603
    python = str(venv / "bin" / "python")
    _pip("install", "-q", "--find-links", str(wheels), requirement, python=python)
    return venv / "bin"


def _distributions(bin_: Path) -> set[str]:
    listed = subprocess.run(  # noqa: S603 - pip with fixed arguments
        [str(bin_ / "python"), "-m", "pip", "list", "--format=json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return {str(entry["name"]).lower() for entry in json.loads(listed.stdout)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    bin_ = _venv(root, wheels, "leasegate")
    workdir = root / "elsewhere"
    workdir.mkdir()
    return Installed(bin_ / "leasegate", workdir)


@pytest.fixture(scope="module")
def proxy_alone(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Path:
    """`leasegate-proxy`'s console script, from an environment with only that distribution."""
    bin_ = _venv(tmp_path_factory.mktemp("proxy-alone"), wheels, "leasegate-proxy")
    assert not _distributions(bin_) & CONTROL_PLANE_DISTRIBUTIONS
    return bin_ / "leasegate-proxy"


def test_the_client_installs_alone_with_no_server_dependency(wheels: Path, tmp_path: Path) -> None:
    bin_ = _venv(tmp_path, wheels, "leasegate-client")
    present = _distributions(bin_)
    assert {"leasegate-client", "leasegate-core", "httpx", "pydantic"} <= present
    assert not present & SERVER_DISTRIBUTIONS
    # what an orchestrator imports, and what it loads: nothing of the server's
    script = (
        "import sys\n"
        "from leasegate.client import ControlClient, Dispatch, classify_failure\n"
        "from leasegate.wire import MintBody\n"
        "ControlClient('http://127.0.0.1:1', 'token').close()\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    loaded = subprocess.run(  # noqa: S603 - the fresh interpreter, a fixed script
        [str(bin_ / "python"), "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    modules = set(loaded.stdout.split())
    assert "httpx" in modules
    assert not modules & {"fastapi", "starlette", "sqlalchemy", "redis", "aiohttp", "orjson"}


def test_version_and_help_from_any_directory(installed: Installed) -> None:
    version = installed.run("--version")
    assert version.returncode == 0
    assert version.stdout.strip().startswith("leasegate 0.")
    listing = installed.run("--help")
    for command in ("dev", "control-plane", "proxy", "migrate", "accounts", "audit"):
        assert command in listing.stdout


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_migrate_is_idempotent_and_a_missing_database_is_one_line(
    installed: Installed, engine: str, tmp_path: Path
) -> None:
    if engine == "sqlite":
        good = f"sqlite+aiosqlite:///{tmp_path / 'lg.db'}"
        missing = f"sqlite+aiosqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}"
        database = None
    else:
        require_service("PostgreSQL", "127.0.0.1", 5432)
        database = await create_database()
        good = pg_url(database)
        missing = pg_url(f"{database}_absent")
    try:
        for _ in range(2):  # the second run finds head and does nothing
            done = await installed.arun("migrate", env={"LEASEGATE_DATABASE_URL": good})
            assert done.returncode == 0, done.stderr
        failed = await installed.arun("migrate", env={"LEASEGATE_DATABASE_URL": missing})
    finally:
        if database is not None:
            await drop_database(database)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1, failed.stderr
    assert lines[0].startswith("leasegate migrate: cannot migrate ")


@pytest.mark.postgres
async def test_an_unreachable_database_is_one_line(installed: Installed) -> None:
    closed = f"postgresql+asyncpg://postgres:secret-pw@127.0.0.1:{free_port()}/leasegate"
    failed = await installed.arun("migrate", env={"LEASEGATE_DATABASE_URL": closed})
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    assert "secret-pw" not in failed.stderr  # the password is masked


async def test_dev_demo_runs_the_readme_walkthrough(installed: Installed) -> None:
    demo_port = free_port()
    with leasegate_process(
        "dev",
        installed.env(),
        program=[str(installed.leasegate)],
        args=["--demo", "--demo-port", str(demo_port)],
        cwd=str(installed.workdir),
    ) as (url, process):
        control = {"Authorization": f"Bearer {DEMO_CONTROL_TOKEN}"}
        async with local_client(base_url=url, timeout=10) as client:
            mint = await client.post(
                "/control/v2/keys",
                json={"tenant": "acme/web", "dispatch_id": "d-1", "model": "demo-model"},
                headers=control,
            )
            assert mint.status_code == 201, mint.text
            minted: dict[str, Any] = mint.json()
            chat = await client.post(
                "/v1/chat/completions",
                json={"model": "demo-model", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {minted['key']}"},
            )
            assert chat.status_code == 200, chat.text
            rows = await _evidence(client, control, minted["mint_decision_id"])
            assert rows[0]["outcome"] == "success"
        admin = {"LEASEGATE_ADMIN_TOKEN": DEMO_ADMIN_TOKEN}
        listed = await installed.arun("accounts", "list", "--url", url, env=admin)
        assert listed.returncode == 0, listed.stderr
        assert "demo-openai" in listed.stdout
    assert process.returncode == 0  # a clean SIGTERM is a clean exit
    assert list(installed.workdir.iterdir()) == []  # the demo's database was temporary


@pytest.mark.postgres
@pytest.mark.redis
async def test_production_processes_from_the_wheel(
    installed: Installed, proxy_alone: Path, tmp_path: Path
) -> None:
    """The control plane from the `leasegate` install, the proxy from a proxy-only one."""
    async with production_stores() as stores, MockUpstream() as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            database_url=stores["database_url"],
            redis_url=stores["redis_url"],
            redis_prefix=stores["redis_prefix"],
        )
        migrated = await installed.arun("migrate", env=env)
        assert migrated.returncode == 0, migrated.stderr
        program, cwd = [str(installed.leasegate)], str(installed.workdir)
        with (
            leasegate_process("control-plane", installed.env(env), program=program, cwd=cwd) as (
                control_url,
                _,
            ),
            leasegate_process("", installed.env(env), program=[str(proxy_alone)], cwd=cwd) as (
                proxy_url,
                _,
            ),
        ):
            control = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
            async with local_client(timeout=10) as client:
                mint = await client.post(
                    f"{control_url}/control/v2/keys",
                    json={"tenant": "acme/web", "dispatch_id": "d-1", "model": "gpt-4o"},
                    headers=control,
                )
                assert mint.status_code == 201, mint.text
                chat = await client.post(
                    f"{proxy_url}/v1/chat/completions",
                    json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"Authorization": f"Bearer {mint.json()['key']}"},
                )
                assert chat.status_code == 200, chat.text
            admin = {"LEASEGATE_ADMIN_TOKEN": ADMIN_TOKEN}
            url = ("--url", control_url)
            drained = await installed.arun(
                "accounts", "drain", "openai-main", "--reason", "moving", *url, env=admin
            )
            assert drained.returncode == 0, drained.stderr
            verified = await installed.arun("audit", "verify", *url, env=admin)
            assert verified.returncode == 0, verified.stderr
            assert "chain ok" in verified.stdout


async def _evidence(
    client: httpx.AsyncClient, headers: Mapping[str, str], decision_id: str
) -> list[dict[str, Any]]:
    for _ in range(100):
        response = await client.get(
            "/control/v2/evidence", params={"decision_id": decision_id}, headers=headers
        )
        rows: list[dict[str, Any]] = response.json()["evidence"]
        if rows:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError("no evidence row")
