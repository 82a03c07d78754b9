"""`make bench`: the proxy's CPU cost and added latency against a direct baseline, in one run.

Loopback only, a few minutes: starts a mock upstream (20-chunk SSE), a fresh Postgres
database, the control plane and a proxy in production mode (Postgres evidence, Redis health)
and `leasegate dev` in embedded mode (SQLite, in-process stores), mints a key on each, then
drives chat completions directly at the mock, through the floor (`bench/floor.py`: the least a
Python forwarder costs on this machine, for scale) and through each gateway: non-streaming at
c=1/16/64 and streaming at c=1/16, each phase `--repeats` times; then mints at c=16; then
the rates fleets run at (`bench/paced.py`: 10 and 50 requests/s against a slow upstream, and
open paced streams until the floor itself breaks), direct, floor and production side by side;
then the CPU a `bedrock` or `vertex` request adds (`bench/cloud_auth.py`: SigV4, the Google
token, decoding Bedrock's event stream).
Prints the issue's summary table (median [min-max] of the repeats) and every phase, and
writes bench/results/latest.json. Everything it started is stopped, and the database
dropped, however the run ends.

    python -m bench.run [--repeats 3] [--ceiling N] [--accounts N] [--live-keys N] [--workers N]
                       [--rotate-keys N] [--key-cache-ttl S] [--streams-cap N] [--streams-burst]
                       [--only json-c16,mint-c16,paced-10,paced-50,streams,cloud-auth]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from bench import wrk
from bench.load import PhaseResult, request_body, request_bytes, run_phase
from bench.paced import (
    FIRST_EVENT_S,
    PACED_MODEL,
    STREAM_S,
    chat_body,
    render,
    run_paced,
    run_streams,
)
from bench.report import phase_table, summary_table, write_json
from bench.stack import (
    CHUNKS,
    CONTROL_TOKEN,
    Options,
    Stack,
    add_live_keys,
    mint_key,
    start_stack,
)
from bench.wakeups import describe, wakeup_costs

RESULTS = Path(__file__).parent / "results"
C1_S, LOADED_S, WARMUP_S = 2.0, 3.0, 0.5
PHASES = (("json", 1), ("json", 16), ("json", 64), ("sse", 1), ("sse", 16))
TARGETS = ("direct", "floor", "production", "embedded")
PACED = ("paced-10", "paced-50", "streams")
PACED_S, STREAMS_S = 6.0, 4.0
STREAM_LEVELS = (100, 250, 500, 1000, 2000, 4000)
BROKEN_PCT = 80.0
"""An open-streams level the floor completes less than this share of ends the phase."""


def _targets(stack: Stack) -> dict[str, tuple[str, int]]:
    return {
        "direct": (stack.upstream.url, stack.upstream.pid),
        "floor": (stack.floor.url, stack.floor.pid),
        "production": (stack.proxy.url, stack.proxy.pid),
        "embedded": (stack.embedded.url, stack.embedded.pid),
    }


async def _phase(
    stack: Stack, target: str, keys: list[str], kind: str, concurrency: int, events: float
) -> PhaseResult:
    url, pid = _targets(stack)[target]
    key = keys[0]
    stream = kind == "sse"
    if concurrency > 1 and wrk.available():
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        return await asyncio.to_thread(
            wrk.run_phase,
            f"{url}/v1/chat/completions",
            request_body(stream=stream),
            headers,
            concurrency=concurrency,
            duration_s=LOADED_S,
            watch_pid=pid,
            mock_pid=stack.upstream.pid,
            events_per_request=events if stream else 0.0,
            keys=keys,
        )
    return await run_phase(
        url,
        request_bytes(url, key, stream=stream),
        concurrency=concurrency,
        duration_s=C1_S if concurrency == 1 else LOADED_S,
        warmup_s=WARMUP_S,
        watch_pid=pid,
        mock_pid=stack.upstream.pid,
    )


_DISPATCHES = itertools.count()
"""Every mint of a run gets a dispatch id of its own (a repeat would get 409s otherwise)."""


async def _mints(url: str, pid: int, concurrency: int) -> PhaseResult:
    counter = _DISPATCHES
    host = url.removeprefix("http://")

    def render() -> bytes:
        body = json.dumps(
            {"tenant": "bench/mint", "dispatch_id": f"m-{next(counter)}", "model": "gpt-4o"}
        ).encode()
        head = (
            f"POST /control/v2/keys HTTP/1.1\r\nhost: {host}\r\n"
            f"authorization: Bearer {CONTROL_TOKEN}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    return await run_phase(
        url,
        render,
        concurrency=concurrency,
        duration_s=LOADED_S,
        warmup_s=WARMUP_S,
        watch_pid=pid,
    )


async def _measure(
    stack: Stack, keys: dict[str, list[str]], repeats: int, only: frozenset[str] | None
) -> dict[str, list[PhaseResult]]:
    phases: dict[str, list[PhaseResult]] = {}
    events = float(CHUNKS + 3)  # corrected by the first measured stream
    for _ in range(repeats):
        for kind, concurrency in PHASES:
            if only is not None and f"{kind}-c{concurrency}" not in only:
                continue
            for target in TARGETS:
                name = f"{target}-{kind}-c{concurrency}"
                sys.stderr.write(f"  {name} ...\n")
                result = await _phase(stack, target, keys[target], kind, concurrency, events)
                if kind == "sse" and concurrency == 1 and result.requests:
                    events = result.events / result.requests
                phases.setdefault(name, []).append(result)
        if only is not None and "mint-c16" not in only:
            continue
        for target, (url, pid) in (
            ("production", (stack.control_plane.url, stack.control_plane.pid)),
            ("embedded", (stack.embedded.url, stack.embedded.pid)),
        ):
            sys.stderr.write(f"  {target}-mint-c16 ...\n")
            phases.setdefault(f"{target}-mint-c16", []).append(await _mints(url, pid, 16))
    return phases


async def _measure_paced(
    stack: Stack, key: str, only: frozenset[str] | None, streams_cap: int, burst: bool
) -> dict[str, list[dict[str, object]]]:
    """The paced-rate and open-streams phases: direct, floor and production side by side."""
    targets = {
        "direct": (stack.slow_upstream.url, stack.slow_upstream.pid),
        "floor": (stack.slow_floor.url, stack.slow_floor.pid),
        "production": (stack.proxy.url, stack.proxy.pid),
    }
    out: dict[str, list[dict[str, object]]] = {}
    plain, stream = chat_body(stream=False), chat_body(stream=True)
    for rate in (10, 50):
        if only is not None and f"paced-{rate}" not in only:
            continue
        for target, (url, pid) in targets.items():
            sys.stderr.write(f"  {target}-paced-{rate} ...\n")
            result = await run_paced(
                url,
                render(url, key, plain),
                rate=rate,
                duration_s=PACED_S,
                pid=pid,
                mock_pid=stack.slow_upstream.pid,
            )
            row = {"target": target, "load_1m": round(os.getloadavg()[0], 2), **vars(result)}
            row["cpu_per_request_ms"] = result.cpu_per_request_ms
            out.setdefault(f"paced-{rate}", []).append(row)
    if only is not None and "streams" not in only:
        return out
    for url, pid in targets.values():
        # two streams each first: what the first stream ever costs once (lazy imports, the
        # first buffers) is not counted as per-stream memory at the first level
        await run_streams(
            url,
            render(url, key, stream),
            concurrency=2,
            duration_s=STREAM_S,
            spread_s=0.0,
            pid=pid,
            mock_pid=stack.slow_upstream.pid,
        )
    for level in (n for n in STREAM_LEVELS if n <= streams_cap):
        floor_broke = False
        for target, (url, pid) in targets.items():
            sys.stderr.write(f"  {target}-streams-{level} ...\n")
            streams = await run_streams(
                url,
                render(url, key, stream),
                concurrency=level,
                duration_s=STREAMS_S,
                spread_s=FIRST_EVENT_S if burst else STREAM_S,
                pid=pid,
                mock_pid=stack.slow_upstream.pid,
            )
            row = {"target": target, "load_1m": round(os.getloadavg()[0], 2), **vars(streams)}
            out.setdefault(f"streams-{level}", []).append(row)
            floor_broke = floor_broke or (target == "floor" and streams.completion_pct < BROKEN_PCT)
        if floor_broke:
            break
    return out


def _paced_table(paced: dict[str, list[dict[str, object]]]) -> str:
    lines = [
        "| phase | target | requests | CPU ms/request | x floor | p50 ms | p99 ms "
        "| mock CPU ms | client CPU % | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    stream_lines = [
        "| streams | target | completion % | added gap p99 ms | added 1st event p99 ms "
        "| stalls | RSS KB/stream | server CPU ms | mock CPU ms | client CPU % | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in paced.items():
        floor = next((r for r in rows if r["target"] == "floor"), None)
        for r in rows:
            cpu = r["cpu"]
            assert isinstance(cpu, dict)  # noqa: S101 - our own rows
            if name.startswith("paced"):
                per = float(str(r["cpu_per_request_ms"]))
                base = float(str(floor["cpu_per_request_ms"])) if floor else float("nan")
                lines.append(
                    f"| {name} | {r['target']} | {r['requests']} | {per:.3f} | {per / base:.2f} "
                    f"| {float(str(r['p50_ms'])):.1f} | {float(str(r['p99_ms'])):.1f} "
                    f"| {cpu.get('mock_cpu_ms', 0):.0f} | {cpu['client_cpu_pct']:.0f} "
                    f"| {r['load_1m']} |"
                )
            else:
                stream_lines.append(
                    f"| {r['concurrency']} | {r['target']} | {float(str(r['completion_pct'])):.0f} "
                    f"| {float(str(r['added_gap_p99_ms'])):.1f} "
                    f"| {float(str(r['added_first_event_p99_ms'])):.1f} | {r['stalls']} "
                    f"| {float(str(r['rss_per_stream_kb'])):.1f} "
                    f"| {cpu.get('server_cpu_ms', 0):.0f} "
                    f"| {cpu.get('mock_cpu_ms', 0):.0f} | {cpu['client_cpu_pct']:.0f} "
                    f"| {r['load_1m']} |"
                )
    return "\n".join(lines) + "\n\n" + "\n".join(stream_lines)


def _cloud_auth() -> tuple[dict[str, float], str]:
    """The cloud kinds' signing, token and decoding cost (bench/cloud_auth.py), or why not."""
    try:
        from bench import cloud_auth  # needs the `bedrock` and `vertex` extras
    except ImportError:
        return {}, "not measured: pip install 'leasegate[bedrock,vertex]'"
    sys.stderr.write("bench: measuring the cloud kinds' signing and decoding\n")
    results = cloud_auth.measure()
    return results, cloud_auth.report(results)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the ExitStack: processes, database


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of every phase (3)")
    parser.add_argument("--ceiling", type=int, default=None, help="request_capacity per account")
    parser.add_argument("--accounts", type=int, default=1, help="accounts in the file (1)")
    parser.add_argument(
        "--live-keys", type=int, default=0, help="extra live keys in the production database"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="processes of the production proxy (1)"
    )
    parser.add_argument(
        "--rotate-keys",
        type=int,
        default=1,
        help="production requests at c>1 take their key in turn from this many (1; at most "
        "--live-keys + 1)",
    )
    parser.add_argument(
        "--key-cache-ttl",
        type=float,
        default=None,
        help="the production proxy's LEASEGATE_KEY_CACHE_TTL_S (0.001: every resolution cold)",
    )
    parser.add_argument(
        "--streams-cap",
        type=int,
        default=1000,
        help="the most concurrent open streams tried (1000; levels 100, 250, 500, 1000, ...; "
        "the phase also ends at the first level the floor completes under 80 %% of)",
    )
    parser.add_argument(
        "--streams-burst",
        action="store_true",
        help="open streams start in step (all N within the first event's wait, then a burst "
        f"of N admissions every {STREAM_S:.2f} s) instead of at a steady rate",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="the phases to run, comma-separated (json-c1, json-c16, json-c64, sse-c1, "
        "sse-c16, mint-c16, paced-10, paced-50, streams, cloud-auth); default all",
    )
    args = parser.parse_args()
    known = {f"{kind}-c{c}" for kind, c in PHASES} | {"mint-c16", *PACED, "cloud-auth"}
    if args.only and not set(args.only.split(",")) <= known:
        parser.error(f"--only takes some of: {', '.join(sorted(known))}")
    if not 1 <= args.rotate_keys <= args.live_keys + 1:
        parser.error("--rotate-keys must be between 1 and --live-keys + 1")
    return args


def main() -> int:
    args = _arguments()
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C raises KeyboardInterrupt even when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    load_before = round(os.getloadavg()[0], 2)
    only = frozenset(args.only.split(",")) if args.only else None
    # before the stack starts, on a machine as quiet as the run's own beginning
    wakeups = wakeup_costs(1.0) if only is None or only & set(PACED) else None
    options = Options(
        ceiling=args.ceiling,
        accounts=args.accounts,
        live_keys=args.live_keys,
        workers=args.workers,
        rotate_keys=args.rotate_keys,
        key_cache_ttl_s=args.key_cache_ttl,
    )
    with ExitStack() as resources:
        sys.stderr.write("bench: starting mock upstream, database, control plane, proxy, dev\n")
        stack = start_stack(resources, RESULTS / "logs", options)
        keys = {"production": [mint_key(stack.control_plane.url)], "direct": ["-"]}
        keys["floor"] = ["-"]
        keys["embedded"] = [mint_key(stack.embedded.url)]
        if options.live_keys:
            extra = add_live_keys(stack.database_url, options.live_keys, keys["production"][0])
            keys["production"] += extra[: options.rotate_keys - 1]
        sys.stderr.write("bench: measuring\n")
        phases = asyncio.run(_measure(stack, keys, args.repeats, only))
        paced: dict[str, list[dict[str, object]]] = {}
        if only is None or only & set(PACED):
            paced_key = mint_key(stack.control_plane.url, "bench-paced", PACED_MODEL)
            paced = asyncio.run(
                _measure_paced(stack, paced_key, only, args.streams_cap, args.streams_burst)
            )
    cloud = _cloud_auth() if only is None or "cloud-auth" in only else None
    meta = {
        "generator": (
            "wrk (c>1) and raw asyncio HTTP/1.1 (c=1, mints)"
            if wrk.available()
            else "raw asyncio HTTP/1.1 (keep-alive); wrk not found: apt-get install wrk"
        ),
        "options": vars(args),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "chunks": CHUNKS,
        "repeats": args.repeats,
        "wall_seconds": round(time.monotonic() - started, 1),
        "loadavg_1m_before_after": [load_before, round(os.getloadavg()[0], 2)],
        "wakeup_us_by_sleep_s": wakeups,
    }
    print(f"load generator: {meta['generator']}; {meta['cpus']} CPUs; loopback")
    print(f"options: {meta['options']}")
    # Other work on the machine skews latency; CPU per request is far less sensitive to it.
    print(f"1-min load average before/after: {meta['loadavg_1m_before_after']}")
    if wakeups is not None:
        # what the paced phases pay per request that a saturated one shares (docs/performance.md)
        print(describe(wakeups))
    print(summary_table(phases))
    print()
    print(phase_table(phases))
    if paced:
        print()
        shape = (
            f"in step, a burst every {STREAM_S:.2f} s"
            if args.streams_burst
            else "started at a steady rate"
        )
        print(f"paced rates (8 KB bodies, upstream 200-350 ms) and open paced streams ({shape}):")
        print(_paced_table(paced))
    if cloud is not None:
        print()
        print("cloud kinds, CPU each adds to a request beyond `anthropic` (bench/cloud_auth.py):")
        print(cloud[1])
    cloud_json = {"cloud_auth": cloud[0]} if cloud is not None else {}
    write_json(RESULTS / "latest.json", {**meta, "paced": paced, **cloud_json}, phases)
    print(f"wrote {RESULTS / 'latest.json'} ({meta['wall_seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
