"""Redis clients that time every call they make and count the ones that fail.

A call is one command (a script's `EVALSHA` included) or one pipeline, timed around redis-py's
own execution, pool wait and the single resend of `connect.py` included: the cost as the
process sees it. A failure is a `RedisError` (refused, timed out, an error reply); `NOSCRIPT`
is not one (redis-py answers it by loading the script, a normal first use). Until `observe`
gives a client its `CallObserver`, it times nothing. Pub/sub connections are not timed (a
subscription waits by design).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from leasegate.core.ports.calls import CallObserver

T = TypeVar("T")


async def _timed(observer: CallObserver, call: Awaitable[T]) -> T:
    started = time.perf_counter()
    try:
        result = await call
    except NoScriptError:
        raise
    except RedisError:
        observer.failed()
        raise
    observer.succeeded(time.perf_counter() - started)
    return result


class TimedRedis(Redis):
    """One Redis server's client (see `connect.redis_client`)."""

    calls: CallObserver | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        call = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await (call if self.calls is None else _timed(self.calls, call))

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        pipe = _TimedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.calls = self.calls
        return pipe


class _TimedPipeline(Pipeline):
    calls: CallObserver | None = None

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        call = super().execute(raise_on_error)
        return await (call if self.calls is None else _timed(self.calls, call))


class TimedRedisCluster(RedisCluster):
    """A Redis Cluster's client (see `redis_client.cluster_client`)."""

    calls: CallObserver | None = None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self.get_default_node() is None:
            # Never initialised: redis-py chooses a command's node before it initialises, and
            # without a slot map it sends a keyed command (a script's EVALSHA) to a random
            # node. A first burst then met MOVED on two in three commands, and the
            # reinitialisation the redirects asked for closed connections other commands
            # were opening (AttributeError on a None writer). One initialisation first.
            await self.initialize()
        call = super().execute_command(*args, **kwargs)
        return await (call if self.calls is None else _timed(self.calls, call))

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        # as redis-py builds its own; `_event_dispatcher` is a typing protocol's attribute
        # that the pipeline never uses
        pipe = _TimedClusterPipeline(self, transaction)  # type: ignore[abstract]
        pipe.calls = self.calls
        return pipe


class _TimedClusterPipeline(ClusterPipeline):
    calls: CallObserver | None = None

    async def execute(
        self, raise_on_error: bool = True, allow_redirections: bool = True
    ) -> list[Any]:
        call = super().execute(raise_on_error, allow_redirections)
        return await (call if self.calls is None else _timed(self.calls, call))


def observe(client: object, observer: CallObserver) -> bool:
    """Time `client`'s calls from now on; False for a client that cannot be (not made here)."""
    if not isinstance(client, TimedRedis | TimedRedisCluster):
        return False
    client.calls = observer
    return True
