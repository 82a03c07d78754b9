"""The processes under test: a mock upstream, a fresh Postgres database, Redis keys under a
prefix of this run's own, the control plane and a proxy in production mode, and `leasegate
dev` in embedded mode (SQLite), each its own OS process.

Everything is registered on one ExitStack, so a failure or Ctrl-C anywhere tears it all down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import redis
import yaml

from bench.paced import FLAKY_MODEL, FLAKY_SERVED, PACED_MODEL

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"
CONTROL_TOKEN = secrets.token_urlsafe(24)
ACCOUNT_ID = "bench-openai"
CHUNKS = 20
STREAM_POOL = 8192
"""Upstream connections the floor and the proxy may hold to the slow mock: the open-streams
phase measures what a process sustains, not a pool's bound."""


@dataclass(frozen=True)
class Service:
    url: str
    pid: int


@dataclass(frozen=True)
class Options:
    ceiling: int | None = None
    """`request_capacity` of every account (None: no ceiling, nothing counted)."""
    accounts: int = 1
    """Accounts in the file, all serving the benchmark's model from the same mock."""
    live_keys: int = 0
    """Extra live keys inserted in the production database before measuring."""
    workers: int = 1
    """`leasegate proxy --workers N` (CPU and RSS are summed over its processes)."""
    rotate_keys: int = 1
    """The production phases' requests take their key in turn from this many (the minted one
    and `rotate_keys - 1` of the extra live keys)."""
    key_cache_ttl_s: float | None = None
    """The production proxy's `LEASEGATE_KEY_CACHE_TTL_S` (None: its default). A TTL far below
    the time between two uses of one key makes every key resolution a database read."""


@dataclass(frozen=True)
class Stack:
    upstream: Service
    floor: Service
    """`bench/floor.py`: the least a forwarder can cost, for scale."""
    control_plane: Service
    proxy: Service
    """Production mode: its own process, Postgres evidence, Redis health."""
    embedded: Service
    """`leasegate dev`: both APIs in one process, SQLite and in-process stores."""
    database_url: str
    slow_upstream: Service
    """`bench/paced.py`: answers after 200-350 ms; streams 64 events 20 ms apart."""
    slow_floor: Service
    """The floor in front of the slow upstream."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def fresh_database() -> Iterator[str]:
    name = f"leasegate_bench_{secrets.token_hex(6)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def redis_prefix() -> Iterator[str]:
    prefix = f"lgbench:{secrets.token_hex(4)}"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=500))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@contextmanager
def process(
    name: str, argv: list[str], env: Mapping[str, str], logs: Path, ready_url: str | None
) -> Iterator[int]:
    """Run `argv` as its own session (Ctrl-C reaches only us); yields its pid once ready."""
    log = (logs / f"{name}.log").open("wb")
    child = subprocess.Popen(  # noqa: S603 - our own modules, fixed arguments
        argv, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_ready(name, child, ready_url, logs / f"{name}.log")
        yield child.pid
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()


def _wait_ready(name: str, child: subprocess.Popen[bytes], url: str | None, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{name} exited early ({child.returncode}):\n{tail}")
        if url is None:
            return
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code < 500:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not become ready; see {log}")


def accounts_file(
    path: Path, upstream: str, options: Options, slow_upstream: str | None = None
) -> Path:
    accounts = [
        {
            "id": ACCOUNT_ID if i == 0 else f"bench-extra-{i}",
            "provider": "openai",
            "base_url": upstream,
            "credential_env": "LEASEGATE_CRED_BENCH_OPENAI",
            "models": {"gpt-4o": "gpt-4o"},
            "request_capacity": options.ceiling,
        }
        for i in range(options.accounts)
    ]
    if slow_upstream is not None:  # the paced phases' model, served by the slow mock only
        accounts.append(
            {
                "id": "bench-paced",
                "provider": "openai",
                "base_url": slow_upstream,
                "credential_env": "LEASEGATE_CRED_BENCH_OPENAI",
                "models": {PACED_MODEL: "gpt-4o"},
                "max_connections": STREAM_POOL,
            }
        )
        accounts.append(  # a model whose only account always fails (bench/soak.py)
            {
                "id": "bench-flaky",
                "provider": "openai",
                "base_url": slow_upstream,
                "credential_env": "LEASEGATE_CRED_BENCH_OPENAI",
                "models": {FLAKY_MODEL: FLAKY_SERVED},
            }
        )
    path.write_text(yaml.safe_dump({"accounts": accounts}))
    return path


def leasegate_argv(command: str, port: int | None = None) -> list[str]:
    argv = [sys.executable, "-m", "leasegate.cli.main", command]
    return [*argv, "--port", str(port)] if port is not None else argv


def start_stack(stack: ExitStack, logs: Path, options: Options) -> Stack:
    logs.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
    up_port = free_port()
    up_url = f"http://127.0.0.1:{up_port}"
    up_argv = [sys.executable, "-m", "leasegate.demo.upstream", "--host", "127.0.0.1"]
    up_argv += ["--port", str(up_port), "--chunks", str(CHUNKS)]
    up_pid = stack.enter_context(process("upstream", up_argv, base_env, logs, None))
    wait_port(up_port)
    floor_port = free_port()
    floor_argv = [sys.executable, "-m", "bench.floor", "--port", str(floor_port)]
    floor_pid = stack.enter_context(
        process("floor", [*floor_argv, "--upstream", up_url], base_env, logs, None)
    )
    wait_port(floor_port)
    slow_port, slow_floor_port = free_port(), free_port()
    slow_argv = [sys.executable, "-m", "bench.paced", "--port", str(slow_port)]
    slow_pid = stack.enter_context(process("slow-upstream", slow_argv, base_env, logs, None))
    wait_port(slow_port)
    slow_url = f"http://127.0.0.1:{slow_port}"
    slow_floor_argv = [*floor_argv[:-1], str(slow_floor_port), "--upstream", slow_url]
    slow_floor_argv += ["--pool", str(STREAM_POOL)]
    slow_floor_pid = stack.enter_context(
        process("slow-floor", slow_floor_argv, base_env, logs, None)
    )
    wait_port(slow_floor_port)

    database_url = stack.enter_context(fresh_database())
    prefix = stack.enter_context(redis_prefix())
    common = {
        **base_env,
        "LEASEGATE_CONTROL_TOKEN": CONTROL_TOKEN,
        "LEASEGATE_CRED_BENCH_OPENAI": "sk-bench-secret",
        "LEASEGATE_KEY_TTL_S": "3600",
        "LEASEGATE_ACCOUNTS_FILE": str(
            accounts_file(logs / "accounts.yaml", up_url, options, slow_url)
        ),
    }
    env = {
        **common,
        "LEASEGATE_DATABASE_URL": database_url,
        "LEASEGATE_REDIS_URL": REDIS_URL,
        "LEASEGATE_REDIS_PREFIX": prefix,
        "LEASEGATE_EVIDENCE_SPILL_PATH": str(logs / "spill"),
    }
    subprocess.run(  # noqa: S603 - our own module, fixed arguments
        leasegate_argv("migrate"), env=env, check=True, capture_output=True, timeout=60
    )
    sqlite = logs / "embedded.db"
    sqlite.unlink(missing_ok=True)
    embedded_env = {**common, "LEASEGATE_DATABASE_URL": f"sqlite+aiosqlite:///{sqlite}"}
    services: dict[str, Service] = {}
    for name, command, service_env in (
        ("control-plane", "control-plane", env),
        ("proxy", "proxy", env),
        ("embedded", "dev", embedded_env),
    ):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = leasegate_argv(command, port)
        if name == "proxy" and options.workers > 1:
            argv += ["--workers", str(options.workers)]
        if name == "proxy" and options.key_cache_ttl_s is not None:
            service_env = {**service_env, "LEASEGATE_KEY_CACHE_TTL_S": str(options.key_cache_ttl_s)}
        pid = stack.enter_context(process(name, argv, service_env, logs, f"{url}/readyz"))
        services[name] = Service(url, pid)
    return Stack(
        Service(up_url, up_pid),
        Service(f"http://127.0.0.1:{floor_port}", floor_pid),
        services["control-plane"],
        services["proxy"],
        services["embedded"],
        database_url,
        Service(slow_url, slow_pid),
        Service(f"http://127.0.0.1:{slow_floor_port}", slow_floor_pid),
    )


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port}")


def mint_key(control_plane: str, dispatch_id: str = "bench-1", model: str = "gpt-4o") -> str:
    response = httpx.post(
        f"{control_plane}/control/v2/keys",
        json={"tenant": "bench/load", "dispatch_id": dispatch_id, "model": model},
        headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
        timeout=10,
    )
    if response.status_code != 201:
        raise RuntimeError(f"mint failed: {response.status_code} {response.text}")
    key: str = response.json()["key"]
    return key


def add_live_keys(database_url: str, count: int, key: str) -> list[str]:
    """`count` more live keys, copies of the minted `key` under new ids (one INSERT); their
    tokens (each has the copied secret, so each resolves)."""
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
    _, key_id, secret = key.split("_", 2)

    async def insert() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(
                """INSERT INTO keys SELECT 'k' || lpad(to_hex(g), 24, '0'), secret_hash,
                   mint_decision_id, tenant, 'bench-extra-' || g, model, served_model,
                   account_id, created_at, expires_at, NULL, NULL,
                   tenant || chr(31) || 'bench-extra-' || g
                   FROM (SELECT * FROM keys WHERE key_id = $2) k, generate_series(1, $1) g""",
                count,
                key_id,
            )
            # as a table that grew over time would be: vacuumed and analysed, so autovacuum
            # does not start on it (and take a core) while the next phase is measured
            await conn.execute("VACUUM ANALYZE keys")
        finally:
            await conn.close()

    asyncio.run(insert())
    return [f"lg_k{g:024x}_{secret}" for g in range(1, count + 1)]
