"""Concurrent writers in several OS processes never lose a Redis health update."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from multiprocessing.synchronize import Barrier

import pytest
import redis.asyncio as aioredis

from leasegate.core.observation import Classification
from leasegate.core.ports.health import HealthPolicy
from leasegate.kv.health_redis import RedisHealthStore

PROCESSES = 2
TASKS_PER_PROCESS = 16
RECORDS_PER_TASK = 60
# never trips, so every failure must land in the streak
POLICY = HealthPolicy(
    failure_threshold=10**9, account_failure_threshold=10**9, base_cooldown_s=30, max_cooldown_s=600
)
FAILURE = Classification("upstream-error", "model", True, "http-503")


async def _hammer(url: str, prefix: str) -> None:
    client = aioredis.from_url(url, max_connections=TASKS_PER_PROCESS)
    store = RedisHealthStore(client, prefix, POLICY, owns_client=True)

    async def one_task() -> None:
        for _ in range(RECORDS_PER_TASK):
            await store.record("acct", "gpt-4o", FAILURE, None, time.time())

    try:
        await asyncio.gather(*(one_task() for _ in range(TASKS_PER_PROCESS)))
    finally:
        await store.aclose()


def _worker(url: str, prefix: str, start: Barrier) -> None:
    start.wait(timeout=10)  # both processes begin writing together
    asyncio.run(_hammer(url, prefix))


@pytest.mark.slow
@pytest.mark.redis
async def test_streak_is_exact_under_writers_in_two_processes(
    redis_url: str, redis_prefix: str
) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    workers = [
        context.Process(target=_worker, args=(redis_url, redis_prefix, start))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    loop = asyncio.get_running_loop()
    for worker in workers:
        await loop.run_in_executor(None, worker.join, 20)
    assert [w.exitcode for w in workers] == [0] * PROCESSES

    client = aioredis.from_url(redis_url)
    store = RedisHealthStore(client, redis_prefix, POLICY, owns_client=True)
    try:
        state = await store.state_of("acct", "gpt-4o", time.time())
    finally:
        await store.aclose()
    assert state.streak == PROCESSES * TASKS_PER_PROCESS * RECORDS_PER_TASK
    assert state.trips == 0
