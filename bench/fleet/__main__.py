"""`python -m bench.fleet [--seconds 60] [--only under,saturated] [--env LEASEGATE_X=V ...]
[--out PATH]`: the fleet benchmark.

For each fleet (under quota: 0.7 x the pool's theoretical maximum; saturated: 1.3 x), a fresh
stack (`bench.fleet.stack`: the mock, Postgres, Redis, a control plane and a proxy), the
mock's buckets emptied, the fleet driven for `--seconds`, then the figures
(`bench.fleet.report`). Prints them and writes bench/results/fleet-latest.json. Everything it
started is stopped, and the databases dropped, however the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from bench.fleet import stack as fleet_stack
from bench.fleet.fleet import DEADLINE_S, Records, drive
from bench.fleet.report import figures, table
from bench.fleet.workload import (
    ACCOUNTS,
    TENANTS,
    WINDOW_S,
    blended_mix,
    fair_maximum,
    fleet_size,
    maximum,
    pace,
)
from bench.stack import CONTROL_TOKEN

RESULTS = Path(__file__).resolve().parent.parent / "results"
FLEETS = {"under": 0.7, "saturated": 1.3}


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet")
    parser.add_argument("--seconds", type=float, default=60.0, help="each fleet's run (60)")
    parser.add_argument(
        "--only", default="under,saturated", help="the fleets to run: under, saturated (both)"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS / "fleet-latest.json", help="where the JSON goes"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="LEASEGATE_X=VALUE",
        help="a setting for both gateway processes (repeatable), e.g. "
        "LEASEGATE_MAX_FALLBACK_HOPS=4; the default run sets none beyond the scaled cooldown",
    )
    args = parser.parse_args()
    if any(not e.startswith("LEASEGATE_") or "=" not in e for e in args.env):
        parser.error("--env takes LEASEGATE_NAME=VALUE")
    if not set(args.only.split(",")) <= set(FLEETS):
        parser.error("--only takes some of: under, saturated")
    if args.seconds < WINDOW_S:
        parser.error(f"--seconds must be at least one window ({WINDOW_S:g})")
    return args


def _one_fleet(
    name: str, workers: dict[str, int], seconds: float, env: dict[str, str]
) -> tuple[dict[str, Any], Records, bool, list[dict[str, int]]]:
    tenants = {t: workers[t.name] for t in TENANTS}
    upstream: dict[str, Any] = {}
    timeline: list[dict[str, int]] = []
    with ExitStack() as resources:
        running = fleet_stack.start(resources, RESULTS / "logs", env)
        sys.stderr.write(f"fleet {name}: {workers} workers for {seconds:g} s\n")

        sampling: list[asyncio.Task[None]] = []

        async def reset() -> None:
            async with httpx.AsyncClient() as http:
                (await http.post(f"{running.mock_url}/fleet/reset")).raise_for_status()
            sampling.append(asyncio.create_task(_sample_leases(running.control_url, timeline)))

        async def read() -> None:
            for task in sampling:
                task.cancel()
            async with httpx.AsyncClient() as http:
                upstream.update((await http.get(f"{running.mock_url}/fleet/stats")).json())

        records = asyncio.run(
            drive(
                running.control_url, running.proxy_url, CONTROL_TOKEN, tenants, seconds, reset, read
            )
        )
    return upstream, records, running.declared_accepted, timeline


async def _sample_leases(control_url: str, timeline: list[dict[str, int]]) -> None:
    """Every second: the live leases of each account (`GET /control/v2/accounts`)."""
    headers = {"authorization": f"Bearer {CONTROL_TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=5.0) as http:
        while True:
            await asyncio.sleep(1.0)
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                answer = (await http.get(f"{control_url}/control/v2/accounts")).json()
                items = answer["accounts"] if isinstance(answer, dict) else answer
                timeline.append({a["id"]: int(a["leases_held"]) for a in items})


def _revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> int:
    args = _arguments()
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    load_before = round(os.getloadavg()[0], 2)
    paces = {t.name: pace(t) for t in TENANTS}
    weights = {t.name: t.share / paces[t.name].tokens_per_s for t in TENANTS}
    mix, tokens_per_turn = blended_mix(paces, weights)
    pool = maximum(ACCOUNTS, mix, tokens_per_turn)
    if args.env:
        print(f"gateway settings: {' '.join(args.env)}")
    print(
        f"limits per {WINDOW_S:g} s instead of per minute (time scaled 6x); base cooldown "
        f"{fleet_stack.BASE_COOLDOWN_S:g} s; lease-rate interval "
        f"{fleet_stack.LEASE_RATE_INTERVAL_S:g} s; no lease_capacity or request_capacity; "
        f"Dispatch deadline {DEADLINE_S:g} s"
    )
    print(
        f"theoretical maximum: {pool.tokens_per_s:,.0f} tokens/s = "
        f"{pool.turns_per_s:.2f} turns/s of the fleet's mean turn ({tokens_per_turn:,.0f} tokens)"
    )
    for account, (rate, binding) in pool.per_account.items():
        print(f"  {account:<10} {rate:5.2f} turns/s, bound by {binding}")
    runs: dict[str, dict[str, Any]] = {}
    declared = None
    env = dict(e.split("=", 1) for e in args.env)
    for name in args.only.split(","):
        load = FLEETS[name]
        workers = fleet_size(load, TENANTS, pool.tokens_per_s)
        offered = sum(paces[t].tokens_per_s * n for t, n in workers.items())
        fair = fair_maximum(ACCOUNTS, paces, workers)
        print(
            f"fleet {name}: the fair mix's maximum (the smaller tenant served in full, the "
            f"other filling the pool): {fair.tokens_per_s:,.0f} tokens/s = "
            f"{fair.turns_per_s:.2f} turns/s"
        )
        upstream, records, declared, held = _one_fleet(name, workers, args.seconds, env)
        runs[f"{name} ({load:g}x)"] = {
            "workers": workers,
            **figures(records, upstream, pool, offered, args.seconds, fair),
            "upstream": upstream,
            "leases_held_each_second": held,
        }
    print(
        f"declared rpm/tpm of the headerless account: "
        f"{'in the accounts file' if declared else 'not accepted by this gateway: left out'}"
    )
    print(table(runs))
    for name, run in runs.items():
        print(
            f"{name}: tasks {run['tasks']}; hops {run['hops']}; failed calls "
            f"{run['failed_calls']} (Retry-After p50/p99 "
            f"{run['failed_calls_retry_after_p50_p99_s']}); dispatch ends "
            f"{run['dispatch_ends']}; mint refusals {run['mint_refusals']}"
        )
        print(
            "  p99 of first turns (the task's mint included) / later turns, per tenant: "
            + "; ".join(
                f"{tenant} {first} s / {later} s"
                for tenant, (first, later) in run["tenant_p99_first_later_s"].items()
            )
        )
        print(
            "  p99 of first turns wanted after the first window (warm-up: buckets empty, every "
            "worker starting): "
            + "; ".join(f"{t} {v} s" for t, v in run["tenant_p99_first_after_warmup_s"].items())
            + "; worst first turns [wanted at, seconds]: "
            + "; ".join(f"{t} {v}" for t, v in run["tenant_worst_first_turns"].items())
        )
        print(
            f"  by account: failed calls {run['failed_calls_by_account']}; "
            f"upstream 429s {run['upstream_429s_by_account']}"
        )
        held = run["leases_held_each_second"]
        order = [spec.id for spec in ACCOUNTS]
        print(
            "  live leases per account ("
            + " / ".join(order)
            + "), every 4 s: "
            + "  ".join("/".join(str(h.get(a, 0)) for a in order) for h in held[::4])
        )
    meta = {
        "command": "python -m bench.fleet " + " ".join(sys.argv[1:]),
        "revision": _revision(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "window_s": WINDOW_S,
        "base_cooldown_s": fleet_stack.BASE_COOLDOWN_S,
        "lease_rate_interval_s": fleet_stack.LEASE_RATE_INTERVAL_S,
        "deadline_s": DEADLINE_S,
        "gateway_env": env,
        "declared_limits_in_accounts_file": declared,
        "maximum": {
            "tokens_per_s": pool.tokens_per_s,
            "turns_per_s": pool.turns_per_s,
            "per_account": pool.per_account,
        },
        "wall_seconds": round(time.monotonic() - started, 1),
        "loadavg_1m_before_after": [load_before, round(os.getloadavg()[0], 2)],
    }
    print(
        f"1-min load average before/after: {meta['loadavg_1m_before_after']}; "
        f"{meta['wall_seconds']} s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "fleets": runs}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
