"""`python -m bench.lowrate`: the production proxy's CPU per request at the rates fleets run
at, beside its saturated figure, and the idle CPU of the proxy and the control plane, in
user and system time apart.

Starts the bench stack once (bench/stack.py), warms it up, then runs `--repeats` rounds of:
idle for `--idle-s` seconds (the proxy's and the control plane's CPU, % of a core), paced
phases at each of `--rates` (bench/paced.py: 8 KB chat bodies, the slow upstream), and a
saturated phase (c=16, the same 8 KB body, the fast mock). Each line gives the proxy's CPU
per request split into user and system time (read from /proc/<pid>/stat in 10 ms ticks),
its ratio to the saturated figure of the same round, the scheduler's own runtime
(/proc/<pid>/task/*/schedstat, in ns: not sampled by ticks), the wake-ups per request
(voluntary context switches: each is one wait of the event loop that slept), and the 1-minute
load average. On this machine (a 2-vCPU Firecracker VM) a process's wake-up from a sleep costs
0.1-0.6 ms of its own CPU time, so at low rates CPU per request follows wake-ups per request.

System time is worth reading apart: callgrind (`bench.instructions`) counts only the
process's own instructions, so per-wake-up work in the kernel (epoll, socket writes, timers)
shows here and not there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from contextlib import ExitStack
from pathlib import Path

from bench.load import run_ns, run_phase
from bench.paced import PACED_MODEL, chat_body, render, run_paced
from bench.stack import Options, Stack, mint_key, start_stack

RESULTS = Path(__file__).parent / "results"
_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _times(pid: int) -> tuple[float, float, float, float]:
    """(user, system, run, sleeps) of the process so far: user and system CPU ms as the
    tick-based accounting of /proc/<pid>/stat charges them, run as the scheduler measured it
    (the sum of every thread's /proc/<pid>/task/<tid>/schedstat runtime, in ns), sleeps the
    voluntary context switches of every thread (a loop iteration that waited: a wake-up)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    sleeps = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        sleeps += int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    run_ms = run_ns(pid) / 1e6
    return int(fields[11]) * _TICK_MS, int(fields[12]) * _TICK_MS, run_ms, sleeps


class _Meter:
    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._start = _times(pid)

    def stop(self) -> tuple[float, float, float, float]:
        now = _times(self._pid)
        user, system, run, sleeps = (a - b for a, b in zip(now, self._start, strict=True))
        return user, system, run, sleeps


def _line(
    name: str, requests: int, used: tuple[float, float, float, float], saturated: float | None
) -> str:
    user, system, run, sleeps = used
    per = (user + system) / requests
    ratio = f" {per / saturated:4.2f}x" if saturated else "      "
    return (
        f"  {name:<6} {requests:5d} req  ticks {per:6.3f} ms/req{ratio} "
        f"(user {user / requests:.3f}, sys {system / requests:.3f})  "
        f"schedstat {run / requests:6.3f} ms/req, {sleeps / requests:5.2f} wake-ups/req"
        f"  load {os.getloadavg()[0]:.2f}"
    )


def _idle(stack: Stack, seconds: float) -> str:
    proxy, control = _Meter(stack.proxy.pid), _Meter(stack.control_plane.pid)
    time.sleep(seconds)
    parts = []
    for name, meter in (("proxy", proxy), ("control plane", control)):
        user, system, run, sleeps = meter.stop()
        share, run_share = (user + system) / seconds / 10, run / seconds / 10
        parts.append(
            f"{name}: ticks {user + system:.0f} ms ({share:.3f} % of a core, sys {system:.0f}),"
            f" schedstat {run:.1f} ms ({run_share:.3f} %), {sleeps / seconds:.1f} wake-ups/s"
        )
    return f"  idle {seconds:.0f} s: " + ", ".join(parts) + f"  load {os.getloadavg()[0]:.2f}"


async def _saturated(
    stack: Stack, key: str, seconds: float
) -> tuple[int, tuple[float, float, float, float]]:
    body = chat_body(stream=False).replace(f'"{PACED_MODEL}"'.encode(), b'"gpt-4o"', 1)
    request = render(stack.proxy.url, key, body)
    meter = _Meter(stack.proxy.pid)
    result = await run_phase(
        stack.proxy.url,
        request,
        concurrency=16,
        duration_s=seconds,
        warmup_s=0.0,
        watch_pid=None,
    )
    return result.requests, meter.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lowrate")
    parser.add_argument("--rates", default="10,50", help="paced rates, requests/s (10,50)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per paced phase (10)")
    parser.add_argument("--saturated-s", type=float, default=4.0, help="c=16 phase (4; 0: none)")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle phase (30; 0: none)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r]
    with ExitStack() as resources:
        stack = start_stack(resources, RESULTS / "logs", Options())
        key = mint_key(stack.control_plane.url)
        paced_key = mint_key(stack.control_plane.url, "bench-paced", PACED_MODEL)
        paced_request = render(stack.proxy.url, paced_key, chat_body(stream=False))
        asyncio.run(_saturated(stack, key, 2.0))  # warm up both routes
        asyncio.run(
            run_paced(
                stack.proxy.url,
                paced_request,
                rate=10,
                duration_s=1,
                pid=stack.proxy.pid,
                mock_pid=stack.slow_upstream.pid,
            )
        )
        time.sleep(2)
        for round_ in range(1, args.repeats + 1):
            print(f"round {round_} (1-min load {os.getloadavg()[0]:.2f}):", flush=True)
            saturated = None
            if args.saturated_s:
                done, used = asyncio.run(_saturated(stack, key, args.saturated_s))
                print(_line("c=16", done, used, None), flush=True)
                saturated = (used[0] + used[1]) / done
            for rate in rates:
                meter = _Meter(stack.proxy.pid)
                result = asyncio.run(
                    run_paced(
                        stack.proxy.url,
                        paced_request,
                        rate=rate,
                        duration_s=args.seconds,
                        pid=stack.proxy.pid,
                        mock_pid=stack.slow_upstream.pid,
                    )
                )
                used = meter.stop()
                name = f"{rate:g}/s"
                print(_line(name, result.requests + result.errors, used, saturated), flush=True)
            if args.idle_s:
                time.sleep(1)  # the last phase's rows and flushes
                print(_idle(stack, args.idle_s), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
