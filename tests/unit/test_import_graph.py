"""The servers load neither the client SDK nor the demo upstream; the client loads nothing of
the servers. Each is checked in a fresh interpreter, where `sys.modules` is the truth."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_after(*modules: str) -> set[str]:
    script = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout))


def test_the_servers_import_graph_holds_no_client_and_no_demo_upstream() -> None:
    loaded = _loaded_after(
        "leasegate.cli.main", "leasegate.control_plane.app", "leasegate.proxy.app"
    )
    unwanted = sorted(m for m in loaded if m.startswith(("leasegate.client", "leasegate.demo")))
    assert not unwanted


def test_the_client_loads_no_server_framework_or_store_driver() -> None:
    loaded = _loaded_after("leasegate.client")
    servers = ("fastapi", "starlette", "sqlalchemy", "redis", "asyncpg", "yaml", "uvicorn")
    assert not sorted(m for m in loaded if m.split(".")[0] in servers)
    gateway = ("leasegate.control_plane", "leasegate.proxy", "leasegate.db", "leasegate.kv")
    assert not sorted(m for m in loaded if m.startswith(gateway))


def test_the_demo_upstream_stays_importable() -> None:
    assert "leasegate.demo.upstream" in _loaded_after("leasegate.demo.upstream")
