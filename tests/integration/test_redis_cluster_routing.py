"""A fresh Redis Cluster client routes its first keyed commands by the slot map: a burst of
scripts on a client that has run nothing yet meets no MOVED redirect. redis-py chooses a
command's node before it initialises, so without `TimedRedisCluster`'s initialisation first
such a burst went to random nodes: two commands in three paid a redirect, and the
reinitialisation the redirects asked for closed connections other commands of the burst were
opening (a slot refused as `StoreUnavailable`)."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from redis.asyncio import Redis

from leasegate.config.redis_url import parse_cluster_url
from leasegate.kv.slots_redis import RedisRequestSlots
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

pytestmark = pytest.mark.redis


async def _redirects(nodes: tuple[tuple[str, int], ...]) -> int:
    """MOVED replies the cluster's nodes have sent since they started."""
    total = 0
    for host, port in nodes:
        node = Redis(host=host, port=port)
        try:
            stats = await node.info("errorstats")
        finally:
            await node.aclose()
        total += int(stats.get("errorstat_MOVED", {}).get("count", 0))
    return total


async def test_a_fresh_clients_first_burst_goes_to_each_keys_own_node(
    redis_cluster_url: str,
) -> None:
    nodes = tuple(parse_cluster_url(redis_cluster_url).nodes)
    before = await _redirects(nodes)
    client = connect(redis_cluster_url, max_connections=64)
    prefix = f"lgtest:{secrets.token_hex(4)}"
    slots = RedisRequestSlots(client, prefix, 30.0)
    try:
        admitted = await asyncio.gather(
            *(slots.acquire(f"acct-{i % 7}", f"r{i}", 5, 1_750_000_000.0) for i in range(60))
        )
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()
    assert sum(admitted) == 7 * 5  # seven accounts, five slots each, none refused as down
    assert await _redirects(nodes) == before
