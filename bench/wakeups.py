"""`python -m bench.wakeups`: what one event-loop wake-up costs on this machine, by how long the
loop slept before it.

A process that answers requests one at a time pays for every wake-up alone: the kernel's
switch, and the loop's own code run again with caches and branch predictors cold from
whatever ran meanwhile (another process, another VM on the host). The longer it slept, the
colder. A bare uvloop loop of `await asyncio.sleep(s)`, timed by the scheduler's own run time
of this process (`bench.load.run_ns`; `time.process_time` where there is none), gives that
cost with no gateway in it, so the paced phases of `make bench` (a request every 100 ms or
20 ms) can be read against the machine they ran on: on a VM where a wake-up after 100 ms asleep
costs 200 µs, three of them are more than a saturated request's whole cost.

    python -m bench.wakeups [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import uvloop

from bench.load import HAS_SCHEDSTAT, run_ns

SLEEPS_S = (0.001, 0.02, 0.1, 0.5)
"""Saturated (a wake-up every millisecond), 50/s, 10/s, nearly idle."""


def _cpu_ns() -> int:
    """This process's run time so far: the scheduler's own count where the kernel has one."""
    return run_ns(os.getpid()) if HAS_SCHEDSTAT else time.process_time_ns()


async def _per_wakeup_us(sleep_s: float, wakeups: int) -> float:
    await asyncio.sleep(sleep_s)  # the first wake-up pays for the loop's own start
    before = _cpu_ns()
    for _ in range(wakeups):
        await asyncio.sleep(sleep_s)
    return (_cpu_ns() - before) / wakeups / 1000


def wakeup_costs(seconds_each: float = 2.0) -> dict[float, float]:
    """µs of CPU per wake-up of a bare uvloop loop, by the seconds it slept before each."""
    return {
        sleep_s: uvloop.run(_per_wakeup_us(sleep_s, max(4, round(seconds_each / sleep_s))))
        for sleep_s in SLEEPS_S
    }


def describe(costs: dict[float, float]) -> str:
    """One line: the cost after each sleep."""
    parts = ", ".join(f"{us:.0f} µs after {sleep_s * 1000:g} ms" for sleep_s, us in costs.items())
    return f"an event-loop wake-up on this machine costs {parts} asleep (bench/wakeups.py)"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wakeups", description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="per sleep length (2)")
    args = parser.parse_args()
    print("| slept before the wake-up | CPU per wake-up, µs |")
    print("|---:|---:|")
    for sleep_s, cost in wakeup_costs(args.seconds).items():
        print(f"| {sleep_s * 1000:g} ms | {cost:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
