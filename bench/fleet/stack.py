"""The processes of one fleet run: the mock upstream, a fresh Postgres database, Redis keys
under a prefix of the run's own, `leasegate migrate`, a control plane and a proxy in
production mode (each its own OS process, on `bench.stack`'s helpers). One ordered pool of
every account in `ACCOUNTS`, no `lease_capacity` or `request_capacity`, the base cooldown
scaled to the mock's time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.fleet.workload import ACCOUNTS, MODEL, AccountSpec
from bench.stack import (
    CONTROL_TOKEN,
    REDIS_URL,
    free_port,
    fresh_database,
    leasegate_argv,
    process,
    redis_prefix,
    wait_port,
)
from leasegate.accounts import AccountsFileError, parse_accounts

BASE_COOLDOWN_S = 5.0
"""LEASEGATE_BASE_COOLDOWN_S: the 30 s default scaled to the mock's 10 s windows."""
LEASE_RATE_INTERVAL_S = 2.0
"""LEASEGATE_LEASE_RATE_INTERVAL_S: the 10 s default (a sixth of a minute's window) scaled to
the mock's 10 s windows, so the lease ceilings learn at the same pace relative to the quota."""


@dataclass(frozen=True)
class FleetStack:
    mock_url: str
    control_url: str
    proxy_url: str
    control_pid: int
    proxy_pid: int
    mock_pid: int
    declared_accepted: bool
    """Whether this gateway's accounts schema took the headerless account's `rpm`/`tpm`."""


def _account_entry(spec: AccountSpec, base_url: str, declared: bool) -> dict[str, Any]:
    model: dict[str, Any] = {"served": spec.served}
    if declared and spec.headers == "none":
        model.update(spec.declared())
    return {
        "id": spec.id,
        "provider": spec.kind,
        "base_url": base_url,
        "credential_env": spec.credential_env,
        "models": {MODEL: model},
    }


def accounts_document(base_url: str) -> tuple[dict[str, Any], bool]:
    """The accounts file, with the declared limits of headerless accounts if the gateway's
    schema accepts them (the quota work adds `rpm`/`tpm`); without them otherwise."""
    credentials = {spec.credential_env for spec in ACCOUNTS}
    document = {"accounts": [_account_entry(s, base_url, True) for s in ACCOUNTS]}
    try:
        parse_accounts(document, credentials)
    except AccountsFileError:
        return {"accounts": [_account_entry(s, base_url, False) for s in ACCOUNTS]}, False
    return document, True


def start(resources: ExitStack, logs: Path, extra_env: Mapping[str, str]) -> FleetStack:
    logs.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
    mock_port = free_port()
    mock_url = f"http://127.0.0.1:{mock_port}"
    specs = logs / "mock-accounts.json"
    specs.write_text(
        json.dumps(
            [
                {"id": s.id, "headers": s.headers, "served": s.served, "limits": s.limits}
                for s in ACCOUNTS
            ]
        )
    )
    mock_argv = [sys.executable, "-m", "bench.fleet.mock", "--port", str(mock_port)]
    mock_argv += ["--accounts", str(specs)]
    mock_pid = resources.enter_context(process("fleet-mock", mock_argv, base_env, logs, None))
    wait_port(mock_port)
    document, declared = accounts_document(mock_url)
    accounts = logs / "fleet-accounts.yaml"
    accounts.write_text(yaml.safe_dump(document, sort_keys=False))
    database_url = resources.enter_context(fresh_database())
    prefix = resources.enter_context(redis_prefix())
    env = {
        **base_env,
        "LEASEGATE_CONTROL_TOKEN": CONTROL_TOKEN,
        "LEASEGATE_ACCOUNTS_FILE": str(accounts),
        "LEASEGATE_DATABASE_URL": database_url,
        "LEASEGATE_REDIS_URL": REDIS_URL,
        "LEASEGATE_REDIS_PREFIX": prefix,
        "LEASEGATE_BASE_COOLDOWN_S": str(BASE_COOLDOWN_S),
        "LEASEGATE_LEASE_RATE_INTERVAL_S": str(LEASE_RATE_INTERVAL_S),
        "LEASEGATE_ACCESS_LOG": "false",
        **{spec.credential_env: spec.secret for spec in ACCOUNTS},
        **extra_env,
    }
    subprocess.run(  # noqa: S603 - our own module, fixed arguments
        leasegate_argv("migrate"), env=env, check=True, capture_output=True, timeout=60
    )
    urls: dict[str, tuple[str, int]] = {}
    for name in ("control-plane", "proxy"):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        pid = resources.enter_context(
            process(f"fleet-{name}", leasegate_argv(name, port), env, logs, f"{url}/readyz")
        )
        urls[name] = (url, pid)
    return FleetStack(
        mock_url,
        urls["control-plane"][0],
        urls["proxy"][0],
        urls["control-plane"][1],
        urls["proxy"][1],
        mock_pid,
        declared,
    )
