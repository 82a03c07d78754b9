"""`python -m bench.evidence_outage`: a long Postgres outage under steady load, then every row.

Starts a mock upstream, a fresh Postgres database, the control plane and one proxy in
production mode (memory bound `--memory-rows`, a spill directory of this run's own), mints a
key, and sends `--rate` non-streaming requests per second: `--before` seconds with the
database up, `--outage` seconds with it down (new connections refused, open ones terminated:
`ALTER DATABASE … ALLOW_CONNECTIONS false` + `pg_terminate_backend`), then brings it back and
waits until the proxy has written every row. Prints: requests sent and their statuses, rows
in the table, distinct request ids, rows missing or unexpected, the largest spill seen, the
time from recovery to the last row, and the proxy's RSS. Loopback only; everything it started
is stopped and the database dropped however the run ends.

With `--kill`, the proxy is killed with SIGKILL at the end of the outage (nothing flushed,
nothing moved to disk by a drain), the database brought back and a successor proxy started on
the same spill directory; it adopts the spill file, and the rows of every request answered
before the kill are counted: at most one flush interval's worth may be missing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import asyncpg
import httpx

from bench.load import rss_kb
from bench.stack import (
    CONTROL_TOKEN,
    PG_HOST,
    PG_PORT,
    PG_USER,
    REDIS_URL,
    Options,
    accounts_file,
    free_port,
    fresh_database,
    leasegate_argv,
    mint_key,
    process,
    redis_prefix,
    wait_port,
)


async def _admin(sql: str, *args: object) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def database_down(name: str) -> None:
    await _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
    await _admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = $1 AND pid <> pg_backend_pid()",
        name,
    )


async def database_up(name: str) -> None:
    await _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


async def rows_written(name: str) -> tuple[int, set[str]]:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=name)
    try:
        ids = [r["request_id"] for r in await conn.fetch("SELECT request_id FROM evidence")]
    finally:
        await conn.close()
    return len(ids), set(ids)


def _gauge(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


class Load:
    """Requests at `rate` per second from a few workers, each waiting for its request's due
    time: at most WORKERS in flight, so a slow moment lowers the rate instead of piling up a
    backlog in the client. Remembers every request id and status."""

    WORKERS = 16

    def __init__(self, client: httpx.AsyncClient, proxy: str, key: str, rate: float) -> None:
        self._client, self._proxy, self._key, self._rate = client, proxy, key, rate
        self.ids: list[str] = []
        self.statuses: collections.Counter[int] = collections.Counter()
        self.errors = 0

    async def _one(self) -> None:
        try:
            response = await self._client.post(
                f"{self._proxy}/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {self._key}"},
            )
        except httpx.HTTPError:
            self.errors += 1
            return
        self.statuses[response.status_code] += 1
        self.ids.append(response.headers["x-leasegate-request-id"])

    async def run(self, seconds: float) -> None:
        start = time.monotonic()
        tickets = iter(range(int(seconds * self._rate)))

        async def worker() -> None:
            for ticket in tickets:
                delay = start + ticket / self._rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._one()

        await asyncio.gather(*(worker() for _ in range(self.WORKERS)))


FLUSH_INTERVAL_S = 0.05
"""The proxy's `LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S` (the default)."""


async def _killed(
    args: argparse.Namespace, load: Load, name: str, successor: Callable[[], str]
) -> int:
    """SIGKILL the proxy at the end of the outage; a successor writes what it left on disk."""
    answered = set(load.ids)
    started = time.monotonic()
    proxy = await asyncio.to_thread(successor)  # kills the proxy, starts the next one
    await database_up(name)
    count, written = await rows_written(name)
    while not answered <= written and time.monotonic() - started < args.wait:
        await asyncio.sleep(0.5)
        count, written = await rows_written(name)
    await asyncio.sleep(1)  # nothing more (no duplicate) arrives late
    count, written = await rows_written(name)
    missing = len(answered - written)
    allowed = max(1, int(args.rate * FLUSH_INTERVAL_S))
    print(
        f"answered before the kill  {len(load.ids)} (statuses {dict(load.statuses)}, "
        f"transport errors {load.errors})"
    )
    print(f"rows in the table         {count}, distinct request ids {len(written)}")
    print(
        f"missing after SIGKILL     {missing} (one flush interval at this rate: "
        f"{args.rate * FLUSH_INTERVAL_S:g} rows)"
    )
    print(f"successor wrote them in   {time.monotonic() - started:.1f} s ({proxy})")
    return 0 if missing <= allowed and count == len(written) else 1


async def _scenario(
    args: argparse.Namespace,
    name: str,
    proxy: str,
    pid: int,
    key: str,
    successor: Callable[[], str],
) -> int:
    limits = httpx.Limits(max_connections=Load.WORKERS, max_keepalive_connections=Load.WORKERS)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        load = Load(client, proxy, key, args.rate)
        await load.run(args.before)
        await database_down(name)
        print(f"database down for {args.outage:g} s at {args.rate:g} requests/s ...", flush=True)
        peak = {"spill_rows": 0.0, "spill_bytes": 0.0, "queue_rows": 0.0}

        async def sample() -> None:
            while True:
                text = (await client.get(f"{proxy}/metrics")).text
                for field, metric in (
                    ("spill_rows", "leasegate_evidence_spill_rows"),
                    ("spill_bytes", "leasegate_evidence_spill_bytes"),
                    ("queue_rows", "leasegate_evidence_queue_rows"),
                ):
                    peak[field] = max(peak[field], _gauge(text, metric))
                await asyncio.sleep(2)

        sampler = asyncio.create_task(sample())
        await load.run(args.outage)
        if args.kill:
            sampler.cancel()
            return await _killed(args, load, name, successor)
        rss_outage = rss_kb(pid)
        await database_up(name)
        recovered = time.monotonic()
        sampler.cancel()
        await load.run(args.after)
        sent = set(load.ids)
        count, written = await rows_written(name)
        while written != sent and time.monotonic() - recovered < args.wait:
            await asyncio.sleep(0.5)
            count, written = await rows_written(name)
        drained_s = time.monotonic() - recovered
    print(
        f"requests sent            {len(load.ids)} (statuses {dict(load.statuses)}, "
        f"transport errors {load.errors})"
    )
    print(f"rows in the table        {count}, distinct request ids {len(written)}")
    print(f"missing / unexpected     {len(sent - written)} / {len(written - sent)}")
    print(
        f"peak spill               {peak['spill_rows']:.0f} rows, "
        f"{peak['spill_bytes'] / 1e6:.1f} MB; peak memory queue {peak['queue_rows']:.0f} rows"
    )
    print(f"recovery to last row     {drained_s:.1f} s (includes {args.after:g} s of load after)")
    print(f"proxy RSS at outage end  {rss_outage / 1024:.0f} MB")
    return 0 if written == sent and count == len(sent) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--before", type=float, default=10.0)
    parser.add_argument("--outage", type=float, default=300.0)
    parser.add_argument("--after", type=float, default=10.0)
    parser.add_argument("--wait", type=float, default=120.0)
    parser.add_argument("--memory-rows", type=int, default=1000)
    parser.add_argument(
        "--kill", action="store_true", help="SIGKILL the proxy at the end of the outage"
    )
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="lg-outage-") as work:
        logs = Path(work)
        up_port = free_port()
        up_argv = [sys.executable, "-m", "leasegate.demo.upstream", "--host", "127.0.0.1"]
        up_argv += ["--port", str(up_port)]
        stack.enter_context(process("upstream", up_argv, base_env, logs, None))
        wait_port(up_port)
        database_url = stack.enter_context(fresh_database())
        env = {
            **base_env,
            "LEASEGATE_DATABASE_URL": database_url,
            "LEASEGATE_REDIS_URL": REDIS_URL,
            "LEASEGATE_REDIS_PREFIX": stack.enter_context(redis_prefix()),
            "LEASEGATE_CONTROL_TOKEN": CONTROL_TOKEN,
            "LEASEGATE_CRED_BENCH_OPENAI": "sk-bench-secret",
            "LEASEGATE_KEY_TTL_S": "3600",
            # the proxy keeps serving the key it knows for the whole outage
            "LEASEGATE_KEY_CACHE_TTL_S": "3600",
            "LEASEGATE_ACCOUNTS_FILE": str(
                accounts_file(logs / "accounts.yaml", f"http://127.0.0.1:{up_port}", Options())
            ),
            "LEASEGATE_EVIDENCE_MEMORY_ROWS": str(args.memory_rows),
            "LEASEGATE_EVIDENCE_SPILL_PATH": str(logs / "spill"),
        }
        subprocess.run(  # noqa: S603 - our own module, fixed arguments
            leasegate_argv("migrate"), env=env, check=True, capture_output=True, timeout=60
        )
        ports = {"control-plane": free_port(), "proxy": free_port()}
        pids = {
            name: stack.enter_context(
                process(
                    name,
                    leasegate_argv(name, port),
                    env,
                    logs,
                    f"http://127.0.0.1:{port}/readyz",
                )
            )
            for name, port in ports.items()
        }
        key = mint_key(f"http://127.0.0.1:{ports['control-plane']}")
        name = database_url.rsplit("/", 1)[1]

        def successor() -> str:
            os.kill(pids["proxy"], signal.SIGKILL)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            argv = leasegate_argv("proxy", port)
            stack.enter_context(process("proxy-successor", argv, env, logs, f"{url}/healthz"))
            return url

        try:
            return asyncio.run(
                _scenario(
                    args,
                    name,
                    f"http://127.0.0.1:{ports['proxy']}",
                    pids["proxy"],
                    key,
                    successor,
                )
            )
        finally:
            asyncio.run(database_up(name))


if __name__ == "__main__":
    raise SystemExit(main())
