"""`python -m bench.control`: what a mint, a renewal and a revocation cost the control plane.

Starts a fresh Postgres database, Redis keys under a prefix of its own and one production
`leasegate control-plane` process (no proxy, no upstream: nothing is proxied), then for each
repeat drives, at c=16 on raw keep-alive HTTP/1.1 (bench/load.py):

- mints of fresh dispatches (`POST /control/v2/keys`);
- renewals (`POST /control/v2/keys/{id}/renew`), each of a different live key;
- revocations (`DELETE /control/v2/keys/{id}`), each of a different live key.

For each phase it prints operations per second, the control plane's CPU per operation and the
CPU the database's server processes (the backends connected to this run's database) spent per
operation, read from /proc around the measured part. With `--profile mint|renew|revoke`,
py-spy samples the control plane during that phase and the package and frame shares are
printed (py-spy is not a project dependency: `pip install py-spy` into the venv).

    python -m bench.control [--repeats 3] [--seconds 3] [--accounts 1] [--profile mint]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.load import PhaseResult, RequestsExhausted, cpu_seconds, run_phase
from bench.profile import summarise
from bench.stack import (
    CONTROL_TOKEN,
    REDIS_URL,
    Options,
    accounts_file,
    free_port,
    fresh_database,
    leasegate_argv,
    process,
    redis_prefix,
)

RESULTS = Path(__file__).parent / "results"
CONCURRENCY = 16


@dataclass(frozen=True)
class ControlStack:
    url: str
    pid: int
    dsn: str
    """asyncpg DSN of this run's database."""


def _start(resources: ExitStack, options: Options) -> ControlStack:
    logs = RESULTS / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    database_url = resources.enter_context(fresh_database())
    prefix = resources.enter_context(redis_prefix())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")},
        "LEASEGATE_CONTROL_TOKEN": CONTROL_TOKEN,
        "LEASEGATE_CRED_BENCH_OPENAI": "sk-bench-secret",
        "LEASEGATE_KEY_TTL_S": "3600",
        "LEASEGATE_ACCOUNTS_FILE": str(
            accounts_file(logs / "accounts.yaml", "http://127.0.0.1:9", options)
        ),
        "LEASEGATE_DATABASE_URL": database_url,
        "LEASEGATE_REDIS_URL": REDIS_URL,
        "LEASEGATE_REDIS_PREFIX": prefix,
    }
    subprocess.run(  # noqa: S603 - our own module, fixed arguments
        leasegate_argv("migrate"), env=env, check=True, capture_output=True, timeout=60
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pid = resources.enter_context(
        process("control-plane", leasegate_argv("control-plane", port), env, logs, f"{url}/readyz")
    )
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
    return ControlStack(url, pid, dsn)


def _request(host: str, method: str, path: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: {host}\r\n"
        f"authorization: Bearer {CONTROL_TOKEN}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_DISPATCHES = itertools.count()


def _mints(host: str) -> Callable[[], bytes]:
    def render() -> bytes:
        body = {"tenant": "bench/mint", "dispatch_id": f"m-{next(_DISPATCHES)}", "model": "gpt-4o"}
        return _request(host, "POST", "/control/v2/keys", json.dumps(body).encode())

    return render


def _on_keys(host: str, key_ids: list[str], method: str, suffix: str) -> Callable[[], bytes]:
    keys = list(reversed(key_ids))

    def render() -> bytes:
        if not keys:
            raise RequestsExhausted  # the phase ends early; its figures are per operation
        return _request(host, method, f"/control/v2/keys/{keys.pop()}{suffix}")

    return render


async def _live_keys(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT key_id FROM keys WHERE revoked_at IS NULL")
    finally:
        await conn.close()
    return [r["key_id"] for r in rows]


async def _backend_pids(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return [r["pid"] for r in rows]


def _proc_cpu(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:  # gone
        return 0.0


def _kernel_seconds(pid: int) -> float:
    """The process's CPU time in the kernel (stime): loopback socket writes show up here."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[12]) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measured:
    phase: str
    result: PhaseResult
    db_cpu_ms: float
    kernel_ms: float
    """Of the control plane's CPU, the part in the kernel."""


async def _phase(
    stack: ControlStack, name: str, request: Callable[[], bytes], seconds: float
) -> Measured:
    before = {pid: _proc_cpu(pid) for pid in await _backend_pids(stack.dsn)}
    kernel_before = _kernel_seconds(stack.pid)
    result = await run_phase(
        stack.url,
        request,
        concurrency=CONCURRENCY,
        duration_s=seconds,
        warmup_s=0.5,
        watch_pid=stack.pid,
    )
    kernel_ms = (_kernel_seconds(stack.pid) - kernel_before) * 1000
    after = {pid: _proc_cpu(pid) for pid in await _backend_pids(stack.dsn)}
    db_ms = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) * 1000
    return Measured(name, result, db_ms, kernel_ms)


async def _top_up(stack: ControlStack, needed: float) -> list[str]:
    """At least `needed` live keys, minting (unmeasured) until there are; their ids."""
    live = await _live_keys(stack.dsn)
    while len(live) < needed:
        await run_phase(
            stack.url,
            _mints(stack.url.removeprefix("http://")),
            concurrency=CONCURRENCY,
            duration_s=2.0,
            warmup_s=0.0,
            watch_pid=None,
        )
        live = await _live_keys(stack.dsn)
    return live


def _request_for(stack: ControlStack, phase: str, live: list[str]) -> Callable[[], bytes]:
    host = stack.url.removeprefix("http://")
    if phase == "mint":
        return _mints(host)
    method, suffix = ("POST", "/renew") if phase == "renew" else ("DELETE", "")
    return _on_keys(host, live, method, suffix)


async def _round(stack: ControlStack, seconds: float, phases: tuple[str, ...]) -> list[Measured]:
    """The phases in order. Renew and revoke each need a live key per operation, each key
    used once: before either, unmeasured mints top the live keys up to what the fastest phase
    so far would use in twice the time."""
    done: list[Measured] = []
    for phase in phases:
        live: list[str] = []
        if phase != "mint":
            fastest = max((m.result.rps for m in done), default=500.0)
            live = await _top_up(stack, 2 * fastest * seconds + 100)
        done.append(await _phase(stack, phase, _request_for(stack, phase, live), seconds))
    return done


def _profiled(stack: ControlStack, phase: str, seconds: float, native: bool) -> str:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = RESULTS / f"profile-{phase}.txt"
    live = [] if phase == "mint" else asyncio.run(_top_up(stack, 1000 * (seconds + 2)))
    request = _request_for(stack, phase, live)
    loader = threading.Thread(
        target=lambda: asyncio.run(_phase(stack, phase, request, seconds + 2))
    )
    loader.start()
    argv = [spy, "record", "-f", "raw", "-o", str(out), "-d", str(int(seconds))]
    argv += ["-p", str(stack.pid), *(["--native"] if native else ["--nonblocking"])]
    subprocess.run(argv, check=True, capture_output=True)  # noqa: S603 - fixed arguments
    loader.join()
    return summarise(out.read_text()) + f"\ncollapsed stacks: {out}"


def _line(name: str, values: list[float], digits: int) -> str:
    clean = sorted(values)
    if len(clean) == 1:
        return f"{name}: {clean[0]:.{digits}f}"
    return (
        f"{name}: {statistics.median(clean):.{digits}f} "
        f"[{clean[0]:.{digits}f}-{clean[-1]:.{digits}f}]"
    )


def _report(rounds: list[list[Measured]]) -> str:
    lines = []
    for phase in ("mint", "renew", "revoke"):
        runs = [m for r in rounds for m in r if m.phase == phase]
        if not runs:
            continue
        ok = [m for m in runs if m.result.requests]
        lines.append(f"{phase} (c={CONCURRENCY}, {len(runs)} runs; median [min-max]):")
        lines.append("  " + _line("ops/s", [m.result.rps for m in ok], 0))
        lines.append(
            "  "
            + _line(
                "control-plane CPU ms per op",
                [(m.result.proc_cpu_ms or 0) / m.result.requests for m in ok],
                3,
            )
        )
        lines.append(
            "  "
            + _line("  of which in the kernel", [m.kernel_ms / m.result.requests for m in ok], 3)
        )
        lines.append(
            "  " + _line("Postgres CPU ms per op", [m.db_cpu_ms / m.result.requests for m in ok], 3)
        )
        lines.append("  " + _line("p50 ms", [m.result.p50_ms for m in ok], 2))
        statuses: dict[int, int] = {}
        for m in runs:
            for status, count in m.result.statuses.items():
                statuses[status] = statuses.get(status, 0) + count
        lines.append(f"  statuses: {dict(sorted(statuses.items()))}")
        lines.append(f"  RSS after: {(runs[-1].result.rss_kb or 0) / 1024:.0f} MB")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.control")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--accounts", type=int, default=1)
    parser.add_argument("--only", choices=("mint",), default=None)
    parser.add_argument("--profile", choices=("mint", "renew", "revoke"), default=None)
    parser.add_argument("--native", action="store_true", help="py-spy --native (C frames)")
    args = parser.parse_args()
    with ExitStack() as resources:
        stack = _start(resources, Options(accounts=args.accounts))
        if args.profile:
            print(_profiled(stack, args.profile, args.seconds, args.native))
            return 0
        phases = ("mint",) if args.only == "mint" else ("mint", "renew", "revoke")
        asyncio.run(_round(stack, 1.0, phases))  # warm-up
        rounds = [asyncio.run(_round(stack, args.seconds, phases)) for _ in range(args.repeats)]
    print(_report(rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
