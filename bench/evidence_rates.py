"""`python -m bench.evidence_rates`: the evidence writer's CPU per row at 1 to 1,000 rows/s.

The proxy's own writer (`EvidenceSink` on `PgProxyStore`, uvloop, a fresh migrated database)
is fed rows at a steady rate from a paced loop, as a proxy's requests would add them. The same
loop is run once more with rows discarded (no writer), and the difference is the writer's
cost: its batches, the INSERTs' replies waking the process, the driver. CPU is this
process's (user + system); the Postgres backend's is not included. Loopback only.

    python -m bench.evidence_rates [--rates 1,10,100,1000] [--rows 40] [--spill]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import uvloop

from bench.evidence_cpu import T0, TEMPLATE
from bench.stack import fresh_database
from leasegate.db import upgrade
from leasegate.pg.proxy_store import PgProxyStore
from leasegate.proxy.evidence import EvidenceSink
from leasegate.proxy.evidence_spill import open_spill

FLUSH_INTERVAL_S = 0.05
"""The production default of `LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S`."""


async def _paced(rate: float, rows: int, sink: EvidenceSink | None, tag: str) -> float:
    """CPU seconds spent while adding `rows` rows at `rate` per second (and writing them)."""
    loop = asyncio.get_running_loop()
    cpu = time.process_time()
    start = loop.time()
    for i in range(rows):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        row = replace(
            TEMPLATE, request_id=f"req_{tag}_{i:09d}", started_at=T0 + timedelta(seconds=i)
        )
        if sink is not None:
            sink.add(row)
    if sink is not None:
        await sink.drain(10.0)
    await asyncio.sleep(1 / rate)  # the last row's interval, as for every other row
    return time.process_time() - cpu


async def _measure(url: str, rate: float, rows: int, spill_dir: Path | None) -> tuple[float, int]:
    store = PgProxyStore.connect(url)
    spill = open_spill(spill_dir, url) if spill_dir is not None else None
    sink = EvidenceSink(store, flush_interval_s=FLUSH_INTERVAL_S, spill=spill)
    sink.start()
    try:
        await _paced(rate, min(rows, 20), sink, f"warm{rate}")  # connection, statement
        baseline = await _paced(rate, rows, None, f"none{rate}")
        writing = await _paced(rate, rows, sink, f"rate{rate}")
        return writing - baseline, sink.pending
    finally:
        await sink.stop(5.0)
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates", default="1,10,100,1000")
    parser.add_argument("--rows", type=int, default=40, help="rows per rate, at least (40)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per rate, at least (4)")
    parser.add_argument("--spill", action="store_true", help="with a spill file configured")
    args = parser.parse_args()
    print("| rows/s | rows | writer CPU µs per row |")
    print("|---:|---:|---:|")
    with fresh_database() as url, tempfile.TemporaryDirectory() as spill_root:
        upgrade(url)
        for rate in (float(r) for r in args.rates.split(",")):
            rows = max(args.rows, int(rate * args.seconds))
            spill_dir = Path(spill_root) if args.spill else None
            cpu, left = uvloop.run(_measure(url, rate, rows, spill_dir))
            print(
                f"| {rate:g} | {rows} | {cpu * 1e6 / rows:.0f} |"
                + (f" {left} left" if left else "")
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
