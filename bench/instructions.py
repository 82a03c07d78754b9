"""Instructions per proxied request, counted by valgrind's callgrind: a cost figure that does
not move with the machine's load, to compare two builds on a shared 2-core host where CPU
time per request varies by +-25 % between runs.

`python -m bench.instructions [--requests N] [--concurrency C] [--stream] [--paced R]
[--idle S] [--body-bytes B]` starts the bundled
mock upstream, a fresh Postgres database, a Redis prefix of its own, the control plane, and the
production proxy under `valgrind --tool=callgrind --instr-atstart=no`; sends a warm-up, then
switches instrumentation on, sends N requests (C at a time), dumps, and prints the proxy's
instructions per request (all of them: the event loop, the evidence writer's batches, the
access log). Under valgrind the proxy runs ~50x slower, so any concurrency above 1 keeps it
saturated, the shape `make bench`'s c=16 phase measures.

`--paced R` sends the requests one at a time, R per second (start times i/R): under valgrind
at R = 1 the proxy is idle between two requests, so each pays every wake-up, flush and
timer alone, the shape of a fleet's 10 requests/s on a native process. The figure then
includes R⁻¹ s of idle work per request; `--idle S` counts S seconds with no request at all
and prints instructions per second, so a paced figure splits into the request's own cost and
the idle work between requests. `--body-bytes B` sends a chat body of about B bytes (the
paced phases of `make bench` send 8 KB) instead of the 512-character message.

It drives the CLI only (`leasegate migrate | control-plane | proxy`, `python -m
leasegate.demo.upstream`), so the same file measures an older build: run it with that build's
interpreter (`/path/to/old/.venv/bin/python bench/instructions.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

PG = "postgresql://postgres@127.0.0.1:5432"
REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = secrets.token_urlsafe(24)
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 512}]}


# The helpers below repeat a few of bench.stack's on purpose: this file runs as a script with
# an older build's interpreter, whose tree may hold a different (or no) bench.stack.


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"{name} is not installed (apt-get install valgrind postgresql-client)")
    return path


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _process(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        child = subprocess.Popen(  # noqa: S603 - our own modules, fixed arguments
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield child
        finally:
            child.terminate()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _ready(url: str, child: subprocess.Popen[bytes], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{url}: the process exited ({child.returncode})")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready in {within_s} s")


@contextmanager
def _database() -> Iterator[str]:
    name = f"lg_instr_{secrets.token_hex(4)}"
    subprocess.run([_tool("psql"), PG, "-qc", f"CREATE DATABASE {name}"], check=True)  # noqa: S603
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        subprocess.run(  # noqa: S603
            [_tool("psql"), PG, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False
        )


def _cli(command: str, port: int | None = None) -> list[str]:
    argv = [sys.executable, "-m", "leasegate.cli.main", command]
    return [*argv, "--port", str(port)] if port is not None else argv


def _body(stream: bool, size: int) -> dict[str, object]:
    if size <= 0:
        return {**BODY, "stream": stream}
    turn = "Summarise the build log and propose the next step for the failing test. "
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    while len(str(messages)) < size - 200:
        role = "user" if len(messages) % 2 else "assistant"
        messages.append({"role": role, "content": turn * 8})
    return {"model": "gpt-4o", "messages": messages, "stream": stream}


async def _send(
    proxy: str, key: str, count: int, concurrency: int, body: dict[str, object], rate: float = 0
) -> int:
    """`count` requests, `concurrency` at a time; with `rate`, one at a time, begun `1/rate`
    s apart (a request still running when the next is due delays it)."""
    failures = 0
    queue = iter(range(count))
    limits = httpx.Limits(max_connections=concurrency)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def worker() -> None:
            nonlocal failures
            for i in queue:
                if rate:
                    await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
                answer = await client.post(
                    f"{proxy}/v1/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {key}"},
                )
                failures += answer.status_code != 200

        await asyncio.gather(*(worker() for _ in range(1 if rate else concurrency)))
    return failures


def _callgrind(pid: int, *args: str) -> None:
    subprocess.run(  # noqa: S603
        [_tool("callgrind_control"), *args, str(pid)], check=True, capture_output=True, timeout=300
    )


def _total(out: Path) -> int:
    summary = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if summary is None:
        raise RuntimeError(f"no totals in {out}")
    return int(summary.group(1))


def measure(
    requests: int,
    concurrency: int,
    stream: bool,
    work: Path,
    *,
    rate: float = 0,
    idle_s: float = 0,
    body_bytes: int = 0,
    keep: Path | None = None,
) -> tuple[int, int]:
    """(instructions, failed requests) for `requests` proxied requests (with `idle_s`: for
    that many seconds with no request, after the warm-up)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
    with ExitStack() as stack:
        up_port, cp_port, proxy_port = _port(), _port(), _port()
        upstream = f"http://127.0.0.1:{up_port}"
        stack.enter_context(
            _process(
                [sys.executable, "-m", "leasegate.demo.upstream", "--port", str(up_port)],
                base,
                work / "upstream.log",
            )
        )
        accounts = work / "accounts.yaml"
        accounts.write_text(
            "accounts:\n  - id: bench-openai\n    provider: openai\n"
            f"    base_url: {upstream}\n    credential_env: LEASEGATE_CRED_BENCH_OPENAI\n"
            "    models: {gpt-4o: gpt-4o}\n"
        )
        env = {
            **base,
            "LEASEGATE_CONTROL_TOKEN": TOKEN,
            "LEASEGATE_CRED_BENCH_OPENAI": "sk-bench-secret",
            "LEASEGATE_KEY_TTL_S": "3600",
            "LEASEGATE_ACCOUNTS_FILE": str(accounts),
            "LEASEGATE_DATABASE_URL": stack.enter_context(_database()),
            "LEASEGATE_REDIS_URL": REDIS_URL,
            "LEASEGATE_REDIS_PREFIX": f"lginstr:{secrets.token_hex(4)}",
            "LEASEGATE_EVIDENCE_SPILL_PATH": str(work / "spill"),
        }
        subprocess.run(_cli("migrate"), env=env, check=True, capture_output=True, timeout=120)  # noqa: S603
        control = stack.enter_context(
            _process(_cli("control-plane", cp_port), env, work / "control.log")
        )
        _ready(f"http://127.0.0.1:{cp_port}/readyz", control, 60)
        out = work / "callgrind.out"
        valgrind = [_tool("valgrind"), "--tool=callgrind", "--instr-atstart=no"]
        valgrind += [f"--callgrind-out-file={out}"]
        proxy = stack.enter_context(
            _process([*valgrind, *_cli("proxy", proxy_port)], env, work / "proxy.log")
        )
        proxy_url = f"http://127.0.0.1:{proxy_port}"
        _ready(f"{proxy_url}/readyz", proxy, 600)
        minted = httpx.post(
            f"http://127.0.0.1:{cp_port}/control/v2/keys",
            json={"tenant": "bench/instr", "dispatch_id": "instr-1", "model": "gpt-4o"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        minted.raise_for_status()
        key = minted.json()["key"]
        body = _body(stream, body_bytes)
        asyncio.run(_send(proxy_url, key, max(20, requests // 10), concurrency, body))
        if rate or idle_s:
            time.sleep(2)  # what the warm-up left to do (a flush, a batch) is not counted
        _callgrind(proxy.pid, "-i", "on")
        if idle_s:
            time.sleep(idle_s)
            failed = 0
        else:
            failed = asyncio.run(_send(proxy_url, key, requests, concurrency, body, rate))
        _callgrind(proxy.pid, "-d")
        dumps = sorted(work.glob("callgrind.out*"), key=lambda p: p.stat().st_mtime)
        if keep is not None:
            shutil.copyfile(dumps[-1], keep)
        return _total(dumps[-1]), failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--paced", type=float, default=0, help="one at a time, R per second")
    parser.add_argument("--idle", type=float, default=0, help="count S seconds of no request")
    parser.add_argument("--body-bytes", type=int, default=0, help="a chat body of ~B bytes")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy the dump here (for callgrind_annotate)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lg-instr-") as tmp:
        instructions, failed = measure(
            args.requests,
            args.concurrency,
            args.stream,
            Path(tmp),
            rate=args.paced,
            idle_s=args.idle,
            body_bytes=args.body_bytes,
            keep=args.keep,
        )
    if args.idle:
        print(f"idle {args.idle:.0f} s: {instructions / args.idle / 1e6:.3f} M instructions per s")
        return
    shape = "stream" if args.stream else "json"
    shape += f" paced {args.paced:g}/s" if args.paced else f" c={args.concurrency}"
    shape += f" body ~{args.body_bytes} B" if args.body_bytes else ""
    print(
        f"{shape}: {args.requests} requests ({failed} not 200), "
        f"{instructions / args.requests / 1e6:.3f} M instructions per request"
    )


if __name__ == "__main__":
    main()
