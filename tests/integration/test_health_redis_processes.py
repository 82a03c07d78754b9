"""Concurrent writers in several OS processes never lose a Redis health update."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import pytest
import redis.asyncio as aioredis

from leasegate.core.observation import Classification
from leasegate.core.ports.health import Admitted, HealthPolicy
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


# -- one trial per window across processes --------------------------------------------------

WINDOW_S = 0.4
TRIAL_POLICY = HealthPolicy(failure_threshold=1, base_cooldown_s=WINDOW_S, max_cooldown_s=10)
RUN_S = 2.0


async def _probe(url: str, prefix: str) -> list[float]:
    """Many tasks ask for admission as fast as they can; every trial let through fails (the
    upstream is still down). Returns when each trial was admitted."""
    client = aioredis.from_url(url, max_connections=TASKS_PER_PROCESS)
    store = RedisHealthStore(client, prefix, TRIAL_POLICY, owns_client=True)
    trials: list[float] = []
    end = time.time() + RUN_S

    async def one_task() -> None:
        while (now := time.time()) < end:
            admission = await store.admit("acct", "gpt-4o", now)
            if isinstance(admission, Admitted):
                assert admission.trial_pair, "the pair never recovers in this test"
                trials.append(now)
                await store.record("acct", "gpt-4o", FAILURE, None, time.time(), trial=admission)
            await asyncio.sleep(0.005)

    try:
        await asyncio.gather(*(one_task() for _ in range(TASKS_PER_PROCESS)))
    finally:
        await store.aclose()
    return trials


def _prober(url: str, prefix: str, start: Barrier, out: Queue[list[float]]) -> None:
    start.wait(timeout=10)
    out.put(asyncio.run(_probe(url, prefix)))


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.redis
async def test_two_processes_let_one_trial_through_per_window(
    redis_url: str, redis_prefix: str
) -> None:
    client = aioredis.from_url(redis_url)
    store = RedisHealthStore(client, redis_prefix, TRIAL_POLICY, owns_client=True)
    try:
        await store.record("acct", "gpt-4o", FAILURE, None, time.time())  # tripped
    finally:
        await store.aclose()
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    out: Queue[list[float]] = context.Queue()
    workers = [
        context.Process(target=_prober, args=(redis_url, redis_prefix, start, out))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    loop = asyncio.get_running_loop()
    results = [await loop.run_in_executor(None, out.get, True, 30) for _ in workers]
    for worker in workers:
        await loop.run_in_executor(None, worker.join, 20)
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    trials = sorted(t for result in results for t in result)
    assert len(trials) >= 2, trials  # trials do keep coming, one window after another
    gaps = [b - a for a, b in itertools.pairwise(trials)]
    assert min(gaps) >= WINDOW_S - 0.01, gaps  # never two in one window, across processes
