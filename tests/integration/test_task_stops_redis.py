"""A background loop of Redis calls, on the gateway's own client, stops when told to, however
the stop falls on its calls: on Python 3.11 a plain `cancel()` is lost about one time in two
(redis-py writes through `asyncio.wait_for`), and a process that awaited such a loop at
shutdown never exited (a proxy's quota view did, on Postgres + Redis)."""

from __future__ import annotations

import asyncio
import random

import pytest

from leasegate.core.tasks import stop_task
from leasegate.kv.connect import redis_client

pytestmark = pytest.mark.redis


async def _reads_forever(client: object, prefix: str) -> None:
    while True:
        async with client.pipeline(transaction=False) as pipe:  # type: ignore[attr-defined]
            for index in range(3):
                pipe.hgetall(f"{prefix}:{index}")
            await pipe.execute()


async def test_a_loop_of_redis_calls_stops_wherever_the_stop_falls(
    redis_url: str, redis_prefix: str
) -> None:
    client = redis_client(redis_url)
    await client.ping()  # connected: the stops fall on calls, not on opening a connection
    try:
        for _ in range(40):
            task = asyncio.create_task(_reads_forever(client, redis_prefix))
            await asyncio.sleep(random.uniform(0, 0.003))
            async with asyncio.timeout(2):
                await stop_task(task)
            assert task.cancelled()
    finally:
        await client.aclose(close_connection_pool=True)
