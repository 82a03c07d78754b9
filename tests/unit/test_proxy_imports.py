"""A production proxy process runs without FastAPI: building its app (Postgres and Redis
configured, untraced and traced) in a fresh interpreter leaves `fastapi` out of
`sys.modules`. The app is built, not started: nothing connects to the stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

_SCRIPT = """
import json, sys
from leasegate.config import load_config
from leasegate.proxy.app import create_proxy_app

app = create_proxy_app(load_config(json.loads(sys.argv[1])))
print(json.dumps({"app": type(app.rest).__name__, "modules": sorted(sys.modules)}))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    accounts = tmp_path / "accounts.yaml"
    account = {
        "id": "openai-main",
        "provider": "openai",
        "base_url": "http://127.0.0.1:9",
        "credential_env": "LEASEGATE_CRED_OPENAI_MAIN",
        "models": {"gpt-4o": "gpt-4o"},
    }
    accounts.write_text(yaml.safe_dump({"accounts": [account]}))
    return {
        "LEASEGATE_ACCOUNTS_FILE": str(accounts),
        "LEASEGATE_CRED_OPENAI_MAIN": "sk-test",
        "LEASEGATE_DATABASE_URL": "postgresql+asyncpg://postgres@127.0.0.1:5432/leasegate",
        "LEASEGATE_REDIS_URL": "redis://127.0.0.1:6379/0",
        **extra,
    }


@pytest.mark.parametrize(
    "extra", [{}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}], ids=["untraced", "traced"]
)
def test_building_the_production_proxy_imports_no_fastapi(
    tmp_path: Path, extra: dict[str, str]
) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", _SCRIPT, json.dumps(_env(tmp_path, **extra))],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    built = json.loads(done.stdout.splitlines()[-1])
    assert built["app"] == "Starlette"
    assert not [m for m in built["modules"] if m.split(".")[0] == "fastapi"]
    assert "leasegate.web.api_app" not in built["modules"]
