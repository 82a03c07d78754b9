"""A production proxy on Postgres reads and writes through plain asyncpg
(`leasegate.db.proxy_pg`): building it loads no SQLAlchemy, which would add 20-30 MB of
resident memory to every proxy process. Checked in a fresh interpreter, where `sys.modules`
is the truth; the app is built, not served, so no database or Redis is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

_SCRIPT = """
import json, sys
from leasegate.config import load_config
from leasegate.proxy.app import create_proxy_app
create_proxy_app(load_config(json.loads(sys.argv[1])))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "alembic"))))
"""


def _loaded_by_a_proxy(tmp_path: Path, database_url: str) -> list[str]:
    accounts = tmp_path / "accounts.yaml"
    account = {
        "id": "openai-main",
        "provider": "openai",
        "base_url": "http://127.0.0.1:1",
        "credential_env": "LEASEGATE_CRED_OPENAI_MAIN",
        "models": {"gpt-4o": "gpt-4o"},
    }
    accounts.write_text(yaml.safe_dump({"accounts": [account]}))
    env = {
        "LEASEGATE_ACCOUNTS_FILE": str(accounts),
        "LEASEGATE_CRED_OPENAI_MAIN": "sk-secret",
        "LEASEGATE_CONTROL_TOKEN": "c" * 32,
        "LEASEGATE_DATABASE_URL": database_url,
        "LEASEGATE_REDIS_URL": "redis://127.0.0.1:6379/0",
    }
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", _SCRIPT, json.dumps(env)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_a_production_proxy_on_postgres_loads_no_sqlalchemy(tmp_path: Path) -> None:
    url = "postgresql+asyncpg://postgres@127.0.0.1:5432/leasegate"
    assert _loaded_by_a_proxy(tmp_path, url) == []


def test_a_proxy_on_sqlite_keeps_sqlalchemy(tmp_path: Path) -> None:
    """The SQLite path (the embedded mode's) still goes through SQLAlchemy."""
    loaded = _loaded_by_a_proxy(tmp_path, f"sqlite+aiosqlite:///{tmp_path}/lg.db")
    assert "sqlalchemy" in loaded
