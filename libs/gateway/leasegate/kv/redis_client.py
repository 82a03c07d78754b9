"""The two kinds of Redis client the stores accept: one server (`Redis`) or a Redis Cluster
(`RedisCluster`). Every store issues only single-slot scripts and commands, so the same code
runs on both; see the hash tags in `leasegate.kv.keys`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode

from leasegate.kv.connect import Deadlines
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_timed import TimedRedisCluster

RedisClient = Redis | RedisCluster


def cluster_client(
    nodes: Sequence[tuple[str, int]],
    *,
    tls: bool = False,
    username: str | None = None,
    password: str | None = None,
    max_connections: int = 512,
    deadlines: Deadlines | None = None,
) -> TimedRedisCluster:
    """A cluster client seeded with `nodes`; it discovers the rest on first use. Every call
    has the same deadlines as a single Redis's (`leasegate.kv.connect`).

    `max_connections` is per node. Connections are opened lazily, so constructing one does
    no I/O."""
    limits = deadlines or Deadlines()
    return TimedRedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in nodes],
        username=username,
        password=password,
        ssl=tls,
        max_connections=max_connections,
        **limits.socket_options(),
    )


async def ping(client: RedisClient) -> None:
    """Raises StoreUnavailable unless Redis answers a PING."""
    try:
        await client.ping()
    except REDIS_ERRORS as exc:
        raise unavailable(exc) from exc


async def close(client: RedisClient) -> None:
    """Close the client and its connections; a Redis that is already gone is no error."""
    with contextlib.suppress(*REDIS_ERRORS):
        if isinstance(client, RedisCluster):
            await client.aclose()  # it owns its node pools
        else:
            # the pool was passed in, so the client would leave its sockets open
            await client.aclose(close_connection_pool=True)
