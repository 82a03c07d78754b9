"""Revocation fan-out over Redis pub/sub, shared by every control-plane and proxy replica.

Pub/sub is fire-and-forget, so a subscriber that loses its connection may miss messages:
on every (re)connect it calls `on_reset`, and the proxy drops its key cache, falling back to
the database (which always knows) until the cache warms again.

On a Redis Cluster, classic PUBLISH reaches subscribers on every node, so the subscription
(redis-py's cluster pub/sub, on the node owning the channel's slot) sees every revocation
whichever node the publisher happened to reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence

from redis.asyncio import RedisCluster
from redis.exceptions import RedisError

from leasegate.core.ports.revocation import OnReset, OnRevoked, Revocation
from leasegate.kv import keys
from leasegate.kv.redis_client import RedisClient

log = logging.getLogger("leasegate.revocations")

_RECONNECT_DELAY_S = 0.5


class RedisRevocationBus:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._channel = keys.revocations_channel(prefix)
        self._task: asyncio.Task[None] | None = None

    async def publish(self, revocations: Sequence[Revocation]) -> None:
        if not revocations:
            return
        payload = json.dumps([[r.key_id, r.expires_at] for r in revocations])
        await self._client.publish(self._channel, payload)

    async def subscribe(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        live = asyncio.Event()
        self._task = asyncio.create_task(self._listen(on_revoked, on_reset, live))
        await live.wait()

    async def _listen(self, on_revoked: OnRevoked, on_reset: OnReset, live: asyncio.Event) -> None:
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                if isinstance(self._client, RedisCluster):
                    # cluster pub/sub routes SUBSCRIBE by the slot map, loaded on first use
                    await self._client.initialize()
                await pubsub.subscribe(self._channel)
                on_reset()
                live.set()
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        on_revoked(_decode(message["data"]))
            except (RedisError, OSError) as exc:
                log.warning("revocation subscription lost", extra={"error": type(exc).__name__})
                await asyncio.sleep(_RECONNECT_DELAY_S)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _decode(data: bytes | str) -> list[Revocation]:
    try:
        items = json.loads(data)
        return [Revocation(str(key_id), float(expires)) for key_id, expires in items]
    except (ValueError, TypeError):
        log.warning("ignored a malformed revocation message")
        return []
