"""Health news over Redis pub/sub, shared by every proxy replica.

A proxy that records a failure publishes which pair or circuit it touched and the cooldown it
knows of; every proxy's local view (`leasegate.proxy.health_view`) takes it in, so a cooldown
opened anywhere is refused everywhere within one pub/sub delivery. The subscription is the
same as the revocations' (subscription_redis.py): on every (re)connect `on_reset` is called
and the view re-reads the store; `ready` is false while it is down, and the view then asks the
store for every request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from leasegate.core.ports.health import HealthNews, OnHealthReset, OnNews
from leasegate.kv import keys
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.subscription_redis import RedisSubscription

log = logging.getLogger("leasegate.health")


class RedisHealthFanout:
    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        *,
        reply_within_s: float = 2.0,
        heartbeat_s: float = 0.5,
    ) -> None:
        self._subscription = RedisSubscription(
            client,
            keys.health_news_channel(prefix),
            "health news",
            "leasegate.health",
            reply_within_s=reply_within_s,
            heartbeat_s=heartbeat_s,
        )

    @property
    def ready(self) -> bool:
        return self._subscription.ready

    async def publish(self, news: Sequence[HealthNews]) -> None:
        if news:
            payload = json.dumps([[n.account_id, n.model, n.until] for n in news])
            await self._subscription.publish(payload)

    async def subscribe(self, on_news: OnNews, on_reset: OnHealthReset) -> None:
        await self._subscription.start(lambda data: on_news(_decode(data)), on_reset)

    async def aclose(self) -> None:
        await self._subscription.aclose()


def _decode(data: bytes | str) -> list[HealthNews]:
    try:
        return [
            HealthNews(str(account), None if model is None else str(model), float(until))
            for account, model, until in json.loads(data)
        ]
    except (ValueError, TypeError):
        log.warning("ignored a malformed health message")
        return []
