"""Health news over Redis pub/sub, shared by every proxy replica.

A proxy that records a failure publishes which pair or circuit it touched and the cooldown it
knows of; every proxy's local view (`leasegate.proxy.health_view`) takes it in, so a cooldown
opened anywhere is refused everywhere within one pub/sub delivery. Pub/sub is fire and
forget: on every (re)connect `on_reset` is called and the view re-reads the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from leasegate.core.ports.health import HealthNews, OnHealthReset, OnNews

log = logging.getLogger("leasegate.health")

_RECONNECT_DELAY_S = 0.5


class RedisHealthFanout:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._client = client
        self._channel = f"{prefix}:health-news"
        self._task: asyncio.Task[None] | None = None

    async def publish(self, news: Sequence[HealthNews]) -> None:
        if news:
            payload = json.dumps([[n.account_id, n.model, n.until] for n in news])
            await self._client.publish(self._channel, payload)

    async def subscribe(self, on_news: OnNews, on_reset: OnHealthReset) -> None:
        live = asyncio.Event()
        self._task = asyncio.create_task(self._listen(on_news, on_reset, live))
        await live.wait()

    async def _listen(self, on_news: OnNews, on_reset: OnHealthReset, live: asyncio.Event) -> None:
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                on_reset()
                live.set()
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        on_news(_decode(message["data"]))
            except (RedisError, OSError) as exc:
                log.warning("health subscription lost", extra={"error": type(exc).__name__})
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


def _decode(data: bytes | str) -> list[HealthNews]:
    try:
        return [
            HealthNews(str(account), None if model is None else str(model), float(until))
            for account, model, until in json.loads(data)
        ]
    except (ValueError, TypeError):
        log.warning("ignored a malformed health message")
        return []
