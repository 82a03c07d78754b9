"""Redis calls as `leasegate_store_call_seconds{store="redis"}` and
`leasegate_store_errors_total{store="redis"}`, on a single Redis and on a Redis Cluster: every
command, script and pipeline is timed; an error reply is counted, a script's first NOSCRIPT
is not."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import RedisCluster

from leasegate.kv.connect import redis_client
from leasegate.kv.redis_client import RedisClient
from leasegate.web.store_metrics import StoreMetrics
from tests.fixtures.redis_cluster import connect

pytestmark = pytest.mark.redis


@pytest.fixture(params=["single", "cluster"])
async def client(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[RedisClient]:
    if request.param == "single":
        made: RedisClient = redis_client(redis_url)
    else:
        made = connect(request.getfixturevalue("redis_cluster_url"))
    try:
        yield made
    finally:
        if isinstance(made, RedisCluster):
            await made.aclose()  # it owns its node pools
        else:
            await made.aclose(close_connection_pool=True)


def _counts(registry: CollectorRegistry) -> tuple[float, float]:
    calls = registry.get_sample_value("leasegate_store_call_seconds_count", {"store": "redis"})
    errors = registry.get_sample_value("leasegate_store_errors_total", {"store": "redis"})
    return calls or 0.0, errors or 0.0


async def test_every_call_is_timed_and_an_error_reply_counted(client: RedisClient) -> None:
    registry = CollectorRegistry()
    StoreMetrics(registry).watch_redis(client)
    key = f"lgtest:{{{secrets.token_hex(4)}}}:metrics"  # one hash slot for the pipeline
    try:
        await client.set(key, "not a number")
        assert await client.get(key) == b"not a number"
        assert _counts(registry) == (2, 0)
        async with client.pipeline(transaction=False) as pipe:
            pipe.strlen(key)
            pipe.exists(key)
            assert await pipe.execute() == [12, 1]
        assert _counts(registry) == (3, 0)  # one pipeline, one call
        script = client.register_script("return redis.call('STRLEN', KEYS[1])")
        assert await script(keys=[key]) == 12  # NOSCRIPT, SCRIPT LOAD, EVALSHA
        calls, errors = _counts(registry)
        assert calls >= 4
        assert errors == 0
        with pytest.raises(Exception, match="not an integer"):
            await client.incr(key)
        assert _counts(registry) == (calls, 1)
    finally:
        await client.delete(key)
