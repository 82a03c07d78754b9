"""What a production proxy process loads. Each of these would cost every proxy process
resident memory for nothing: FastAPI (its app is Starlette alone), SQLAlchemy and Alembic
(on Postgres it reads and writes through plain asyncpg, `leasegate.pg.proxy_store`), and, while
untraced, the span makers (`leasegate.proxy.spans`, `leasegate.web.server_spans`).

Checked in a fresh interpreter, where `sys.modules` is the truth, importing what
`leasegate proxy` imports (the CLI and the proxy's composition root) and building the app,
not serving it: nothing connects to the stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

_SCRIPT = """
import json, sys
import leasegate.cli.main, leasegate.proxy.main
from leasegate.config import load_config
from leasegate.proxy.app import create_proxy_app

app = create_proxy_app(load_config(json.loads(sys.argv[1])))
print(json.dumps({"app": type(app.rest).__name__, "modules": sorted(sys.modules)}))
"""
POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/leasegate"
SPAN_MAKERS = {"leasegate.proxy.spans", "leasegate.web.server_spans"}


def _built(tmp_path: Path, database_url: str, **extra: str) -> tuple[str, set[str]]:
    """The proxy app's class and every module loaded by building it."""
    accounts = tmp_path / "accounts.yaml"
    account = {
        "id": "openai-main",
        "provider": "openai",
        "base_url": "http://127.0.0.1:9",
        "credential_env": "LEASEGATE_CRED_OPENAI_MAIN",
        "models": {"gpt-4o": "gpt-4o"},
    }
    accounts.write_text(yaml.safe_dump({"accounts": [account]}))
    env = {
        "LEASEGATE_ACCOUNTS_FILE": str(accounts),
        "LEASEGATE_CRED_OPENAI_MAIN": "sk-test",
        "LEASEGATE_DATABASE_URL": database_url,
        "LEASEGATE_REDIS_URL": "redis://127.0.0.1:6379/0",
        "LEASEGATE_EVIDENCE_SPILL_PATH": str(tmp_path / "spill"),
        **extra,
    }
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", _SCRIPT, json.dumps(env)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    built = json.loads(done.stdout.splitlines()[-1])
    return built["app"], set(built["modules"])


def _packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_an_untraced_proxy_on_postgres_loads_no_framework_orm_or_span_maker(
    tmp_path: Path,
) -> None:
    app, modules = _built(tmp_path, POSTGRES)
    assert app == "Starlette"
    assert not _packages(modules) & {"fastapi", "sqlalchemy", "alembic"}
    assert not modules & SPAN_MAKERS
    assert not {m for m in modules if m.startswith(("leasegate.control_plane", "leasegate.db"))}


def test_a_traced_proxy_makes_its_own_spans_without_fastapi(tmp_path: Path) -> None:
    app, modules = _built(tmp_path, POSTGRES, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert app == "Starlette"
    assert "fastapi" not in _packages(modules)
    assert modules >= SPAN_MAKERS


def test_a_proxy_on_sqlite_keeps_sqlalchemy(tmp_path: Path) -> None:
    """The SQLite path (the embedded mode's) still goes through SQLAlchemy."""
    _, modules = _built(tmp_path, f"sqlite+aiosqlite:///{tmp_path}/lg.db")
    assert "sqlalchemy" in _packages(modules)
