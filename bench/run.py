"""`make bench`: the proxy's throughput, latency and CPU cost against a direct baseline.

One run, loopback only, about a minute: starts a mock upstream (20-chunk SSE), a fresh
Postgres database, the control plane and two proxies in production mode (one account with
`request_capacity: null`, one with `request_capacity: 1000`), mints a key, then drives
non-streaming and streaming chat completions directly at the mock and through each proxy.
Prints a table and writes bench/results/latest.json. Everything it started is stopped, and
the database dropped, however the run ends.
"""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from bench.load import PhaseResult, request_bytes, run_phase
from bench.report import summary, table, write_json
from bench.stack import CHUNKS, Stack, mint_key, start_stack

RESULTS = Path(__file__).parent / "results"
C1_S, C64_S, WARMUP_S = 2.0, 3.0, 0.5


async def _measure(stack: Stack, key: str) -> dict[str, PhaseResult]:
    targets = {
        "direct": (stack.upstream.url, stack.upstream.pid),
        "proxy": (stack.proxy.url, stack.proxy.pid),
        "capped": (stack.proxy_capped.url, stack.proxy_capped.pid),
    }
    plan = [
        (target, kind, concurrency)
        for concurrency in (1, 64)
        for target in ("direct", "proxy", "capped")
        if not (target == "capped" and concurrency == 1)
        for kind in ("json", "sse")
    ]
    phases: dict[str, PhaseResult] = {}
    for target, kind, concurrency in plan:
        url, pid = targets[target]
        name = f"{target}-{kind}-c{concurrency}"
        sys.stderr.write(f"  {name} ...\n")
        phases[name] = await run_phase(
            url,
            request_bytes(url, key, stream=kind == "sse"),
            concurrency=concurrency,
            duration_s=C1_S if concurrency == 1 else C64_S,
            warmup_s=WARMUP_S,
            watch_pid=pid,
        )
    return phases


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the ExitStack: processes, database


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C raises KeyboardInterrupt even when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    load_before = round(os.getloadavg()[0], 2)
    with ExitStack() as resources:
        sys.stderr.write("bench: starting mock upstream, database, control plane, proxies\n")
        stack = start_stack(resources, RESULTS / "logs")
        key = mint_key(stack.control_plane.url)
        sys.stderr.write("bench: measuring\n")
        phases = asyncio.run(_measure(stack, key))
    figures = summary(phases)
    meta = {
        "generator": "raw asyncio HTTP/1.1 (keep-alive), not httpx",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "chunks": CHUNKS,
        "c1_seconds": C1_S,
        "c64_seconds": C64_S,
        "warmup_seconds": WARMUP_S,
        "watched_process": "direct-*: the mock upstream; proxy-*/capped-*: that proxy",
        "wall_seconds": round(time.monotonic() - started, 1),
        "loadavg_1m_before_after": [load_before, round(os.getloadavg()[0], 2)],
    }
    print(f"load generator: {meta['generator']}; {meta['cpus']} CPUs; loopback")
    # Other work on the machine skews every figure; a 1-minute load above ~3 on 2 CPUs is
    # worth a second run.
    print(f"1-min load average before/after: {meta['loadavg_1m_before_after']}")
    print("cpu ms/req, cpu ms/ev, RSS: the mock for direct-*, the proxy for proxy-*/capped-*")
    print("ev/req: SSE `data:` events received per response (20 deltas + framing + [DONE])")
    print(table(phases, figures))
    write_json(RESULTS / "latest.json", meta, phases, figures)
    print(f"wrote {RESULTS / 'latest.json'} ({meta['wall_seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
