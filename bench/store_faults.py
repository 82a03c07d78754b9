"""`python -m bench.store_faults`: how long answers take while each store is partitioned.

Starts the test suite's faulty gateway (a control plane and a proxy as processes, Postgres and
Redis behind relays, `tests/fixtures/faults.py`) with the documented store deadlines, then
blackholes Postgres and Redis in turn and prints, for each, the status and time of a mint, a
proxied call with a key the proxy has never seen and one with a key it knows (its cache entry
aged out), and both `/readyz`; then how long after the store returns both are ready again.
Loopback only; everything it started is stopped however the run ends.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

import httpx

from tests.fixtures import faults


async def _ready(gw: faults.FaultyGateway) -> bool:
    statuses = [
        (await gw.client.get(f"{u}/readyz")).status_code for u in (gw.control_url, gw.proxy_url)
    ]
    return statuses == [200, 200]


async def main() -> None:
    faults.FAULT_SETTINGS.clear()  # the documented deadlines ...
    faults.FAULT_SETTINGS["LEASEGATE_KEY_CACHE_TTL_S"] = "1"  # ... and a cache that ages fast
    with tempfile.TemporaryDirectory() as tmp:
        async with faults.faulty_gateway(Path(tmp)) as gw:
            known = await gw.minted_key(dispatch_id="d-known")
            if (await gw.chat(known)).status_code != 200:
                raise SystemExit("the gateway did not serve a fresh key")
            unseen = await gw.minted_key(dispatch_id="d-unseen")
            await asyncio.sleep(1.2)
            for store, relay in (("postgres", gw.postgres), ("redis", gw.redis)):
                relay.mode = "blackhole"
                calls: list[tuple[str, Awaitable[httpx.Response]]] = [
                    ("mint", gw.mint(dispatch_id="d-during")),
                    ("proxied call, unseen key", gw.chat(unseen)),
                    ("proxied call, known key", gw.chat(known)),
                    ("control plane /readyz", gw.client.get(f"{gw.control_url}/readyz")),
                    ("proxy /readyz", gw.client.get(f"{gw.proxy_url}/readyz")),
                ]
                for name, call in calls:
                    response, took = await faults.timed(call)
                    print(f"{store} partitioned: {name}: {response.status_code} in {took:.2f} s")
                relay.mode = "pass"
                started = time.monotonic()
                await faults.eventually(lambda: _ready(gw), 30, every_s=0.1)
                print(f"{store} back: both ready after {time.monotonic() - started:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
