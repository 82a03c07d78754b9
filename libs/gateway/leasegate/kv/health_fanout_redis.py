"""Health news over Redis pub/sub, shared by every proxy replica.

A proxy that records a failure publishes which pair or circuit it touched and the cooldown it
knows of; every proxy's local view (`leasegate.proxy.health_view`) takes it in, so a cooldown
opened anywhere is refused everywhere within one pub/sub delivery. The subscription is the
same as the revocations' (subscription_redis.py): on every (re)connect `on_reset` is called
and the view re-reads the store; `ready` is false while it is down, and the view then asks the
store for every request.

The channel also carries quota news (`core.ports.quota.QuotaNewsBus`): a message that is a JSON
object `{"quota": [{"a": account, "m": served model, ...the quota hash's fields}]}` instead of
the health news' JSON list. It goes to the quota listeners (each proxy's quota view), never to
the health view. (A proxy from before quota news logs it as a malformed health message and
ignores it.)
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence

from leasegate.core.ports.health import HealthNews, OnHealthReset, OnNews
from leasegate.core.ports.quota import OnQuotaNews, Quota
from leasegate.kv import keys
from leasegate.kv.quota_redis import parse_quota, quota_fields
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
        subscription: RedisSubscription | None = None,
    ) -> None:
        """`subscription`: one shared with other buses (it listens on this bus's channel
        too); else one of its own."""
        self._channel = keys.health_news_channel(prefix)
        self._subscription = subscription or RedisSubscription(
            client,
            (self._channel,),
            "health news",
            "leasegate.health",
            reply_within_s=reply_within_s,
            heartbeat_s=heartbeat_s,
        )
        self._quota_listeners: list[OnQuotaNews] = []

    @property
    def ready(self) -> bool:
        return self._subscription.ready

    def trusted(self) -> bool:
        """Live and heard from lately (see subscription_redis.py); asked per request."""
        return self._subscription.trusted()

    async def confirmed(self) -> bool:
        """`trusted()`, or once the heartbeat that asking sent is answered (a burst after an
        idle spell: one round trip for all of it; see subscription_redis.py)."""
        return await self._subscription.confirmed()

    async def publish(self, news: Sequence[HealthNews]) -> None:
        if news:
            payload = json.dumps([[n.account_id, n.model, n.until] for n in news])
            await self._subscription.publish(self._channel, payload)

    async def publish_quota(self, quotas: Sequence[Quota]) -> None:
        if quotas:
            payload = {
                "quota": [{"a": q.account_id, "m": q.model, **quota_fields(q)} for q in quotas]
            }
            await self._subscription.publish(self._channel, json.dumps(payload))

    def on_quota(self, deliver: OnQuotaNews) -> None:
        self._quota_listeners.append(deliver)

    async def subscribe(self, on_news: OnNews, on_reset: OnHealthReset) -> None:
        deliver = functools.partial(self._deliver, on_news=on_news)
        await self._subscription.start(self._channel, deliver, on_reset)

    def _deliver(self, data: bytes | str, on_news: OnNews) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            log.warning("ignored a malformed health message")
            return
        if isinstance(message, dict):
            quotas = _quotas(message)
            for deliver in self._quota_listeners:
                deliver(quotas)
        else:
            on_news(_decode(message))

    async def aclose(self) -> None:
        await self._subscription.aclose(self._channel)


def _decode(message: object) -> list[HealthNews]:
    try:
        if not isinstance(message, list):
            raise TypeError
        return [
            HealthNews(str(account), None if model is None else str(model), float(until))
            for account, model, until in message
        ]
    except (ValueError, TypeError):
        log.warning("ignored a malformed health message")
        return []


def _quotas(message: dict[str, object]) -> list[Quota]:
    """The quotas of a quota-news message; the unreadable ones are left out."""
    found: list[Quota] = []
    raw = message.get("quota")
    items: list[object] = raw if isinstance(raw, list) else []
    for item in items:
        if not isinstance(item, dict):
            continue
        account, model = item.get("a"), item.get("m")
        if not isinstance(account, str) or not isinstance(model, str):
            continue
        fields = {k: v for k, v in item.items() if k not in ("a", "m") and isinstance(v, str)}
        quota = parse_quota(account, model, fields)
        if quota is not None:
            found.append(quota)
    if not isinstance(raw, list) or len(found) != len(items):
        log.warning("ignored a malformed quota message")
    return found
