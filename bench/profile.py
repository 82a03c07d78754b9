"""`python -m bench.profile`: where the production proxy's CPU goes under non-stream load.

Starts the bench stack (bench/stack.py), drives the production proxy with non-streaming chat
completions at c=16 (wrk if installed, else the Python generator) while `py-spy record`
samples the proxy, and prints the share of samples that pass through each package
(inclusive) and the functions most often on top (self). With `--paced R` the load is instead
R requests per second of 8 KB chat bodies against the slow upstream (bench/paced.py),
`--paced 0` leaves the proxy idle, and `--streams N` holds N open paced streams started at a
steady rate (`bench.paced.run_streams`); each prints the proxy's own CPU over the sampled
time.
py-spy is not a dependency of the project: `pip install py-spy` into the venv first. Writes
bench/results/profile.txt (the collapsed stacks, loadable by speedscope or flamegraph.pl).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import threading
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from bench import wrk
from bench.load import cpu_seconds, request_body, request_bytes, run_phase
from bench.paced import PACED_MODEL, chat_body, render, run_paced, run_streams
from bench.stack import Options, Stack, mint_key, start_stack

RESULTS = Path(__file__).parent / "results"
GROUPS = (
    "aiohttp",
    "httpx",
    "httpcore",
    "anyio",
    "starlette",
    "fastapi",
    "uvicorn",
    "redis",
    "sqlalchemy",
    "asyncpg",
    "leasegate/proxy",
    "leasegate/upstream",
    "leasegate/kv",
    "leasegate/web",
    "asyncio",
)


def _load(url: str, key: str, seconds: float, pid: int, mock: int) -> None:
    if wrk.available():
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        wrk.run_phase(
            f"{url}/v1/chat/completions",
            request_body(stream=False),
            headers,
            concurrency=16,
            duration_s=seconds,
            watch_pid=pid,
            mock_pid=mock,
            events_per_request=0.0,
        )
        return
    asyncio.run(
        run_phase(
            url,
            request_bytes(url, key, stream=False),
            concurrency=16,
            duration_s=seconds,
            warmup_s=0.5,
            watch_pid=pid,
        )
    )


def _slow_route(stack: Stack, key: str, seconds: float, *, rate: int, streams: int) -> None:
    """`rate` paced requests a second, or (`streams` > 0) that many open paced streams,
    against the slow upstream; neither: the proxy left idle."""
    if rate == 0 and streams == 0:
        threading.Event().wait(seconds)
        return
    url = stack.proxy.url
    request = render(url, key, chat_body(stream=streams > 0))
    pid, mock = stack.proxy.pid, stack.slow_upstream.pid
    load = (
        run_streams(url, request, concurrency=streams, duration_s=seconds, pid=pid, mock_pid=mock)
        if streams
        else run_paced(url, request, rate=rate, duration_s=seconds, pid=pid, mock_pid=mock)
    )
    asyncio.run(load)


def summarise(collapsed: str, top: int = 25) -> str:
    inclusive: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    busy: Counter[str] = Counter()
    """Inclusive by function over the samples not sitting in the event loop itself (on a
    loaded machine a runnable-but-waiting process is sampled there, drowning the rest)."""
    total = busy_total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for group in GROUPS:
            if any(f"/{group}/" in frame or f"{group}/" in frame for frame in frames):
                inclusive[group] += count
        self_time[frames[-1]] += count
        if not frames[-1].startswith("Runner.run"):
            busy_total += count
            for name in {frame.split(" (")[0] for frame in frames}:
                busy[name] += count
    lines = [f"{total} samples; inclusive share by package:"]
    lines += [f"  {g:<22}{100 * n / total:5.1f} %" for g, n in inclusive.most_common()]
    lines.append(f"{busy_total} samples outside the event loop; inclusive share of those:")
    # past the entry frames (module, server, loop) nearly every stack shares
    shown = [(f, n) for f, n in busy.most_common() if n < 0.75 * busy_total][:top]
    lines += [f"  {100 * n / busy_total:5.1f} %  {f}" for f, n in shown]
    lines.append(f"top {top} frames by self time:")
    lines += [f"  {100 * n / total:5.1f} %  {f}" for f, n in self_time.most_common(top)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--ceiling", type=int, default=None, help="request_capacity per account (slots counted)"
    )
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    slow = parser.add_mutually_exclusive_group()
    slow.add_argument(
        "--paced",
        type=int,
        default=None,
        help="requests per second against the slow upstream instead of c=16 (0: idle)",
    )
    slow.add_argument(
        "--streams", type=int, default=None, help="N open paced streams instead of c=16"
    )
    args = parser.parse_args()
    if (args.paced or 0) < 0 or (args.streams is not None and args.streams < 1):
        parser.error("--paced takes 0 or more, --streams 1 or more")
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = RESULTS / "profile.txt"
    with ExitStack() as resources:
        stack = start_stack(resources, RESULTS / "logs", Options(ceiling=args.ceiling))
        key = mint_key(stack.control_plane.url)
        pid = stack.proxy.pid
        _load(stack.proxy.url, key, 2.0, pid, stack.upstream.pid)  # warm up
        if args.paced is None and args.streams is None:
            loader = threading.Thread(
                target=_load,
                args=(stack.proxy.url, key, args.seconds + 2, pid, stack.upstream.pid),
            )
        else:
            paced_key = mint_key(stack.control_plane.url, "bench-paced", PACED_MODEL)
            rate, streams = args.paced or 0, args.streams or 0
            # warm up the slow route (an idle profile too: one request a second)
            _slow_route(stack, paced_key, 2.0, rate=max(rate, 1), streams=streams)
            loader = threading.Thread(
                target=_slow_route,
                args=(stack, paced_key, args.seconds + 2),
                kwargs={"rate": rate, "streams": streams},
            )
        cpu_before = cpu_seconds(pid)
        loader.start()
        argv = [spy, "record", "-f", "raw", "-o", str(out), "-d", str(int(args.seconds))]
        argv += ["-r", str(args.rate)]
        subprocess.run(  # noqa: S603 - py-spy with fixed arguments
            [*argv, "-p", str(pid), "--nonblocking"],
            check=True,
            capture_output=True,
        )
        cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000
        loader.join()
    sampled = args.seconds
    share = cpu_ms / sampled / 10
    print(f"proxy CPU over the sampled {sampled:.0f} s: {cpu_ms:.0f} ms ({share:.2f} % of a core)")
    if args.paced:
        print(f"  ~{cpu_ms / (args.paced * sampled):.2f} ms per request at {args.paced}/s")
    print(summarise(out.read_text()))
    print(f"collapsed stacks: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
