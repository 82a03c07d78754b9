"""Revocation fan-out over Redis pub/sub, shared by every control-plane and proxy replica.

Pub/sub is fire-and-forget, so a subscriber that loses its connection may miss messages:
on every (re)connect it calls `on_reset`, and the proxy drops its key cache, falling back to
the database (which always knows) until the cache warms again.

The subscription (subscription_redis.py) never holds up start-up, reconnects with backoff and
notices a silent connection by its heartbeat (a PING every `heartbeat_s`; dead after three
without an answer); `ready` is false while it is down, and the proxy's key cache then trusts
an entry for at most a second (proxy/keys.py); /readyz reports it under `redis`. On a Redis
Cluster, classic PUBLISH reaches subscribers on every node, so the subscription sees every
revocation whichever node the publisher happened to reach.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from leasegate.core.ports.revocation import OnReset, OnRevoked, Revocation
from leasegate.kv import keys
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.subscription_redis import RedisSubscription

log = logging.getLogger("leasegate.revocations")


class RedisRevocationBus:
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
        self._channel = keys.revocations_channel(prefix)
        self._subscription = subscription or RedisSubscription(
            client,
            (self._channel,),
            "revocation",
            "leasegate.revocations",
            reply_within_s=reply_within_s,
            heartbeat_s=heartbeat_s,
        )

    @property
    def ready(self) -> bool:
        """False while a subscription is wanted and not live (revocations could be missed)."""
        return self._subscription.ready

    def trusted(self) -> bool:
        """Live and heard from lately (see subscription_redis.py); asked per request."""
        return self._subscription.trusted()

    async def confirmed(self) -> bool:
        """`trusted()`, or once the heartbeat that asking sent is answered (a burst after an
        idle spell: one round trip for all of it; see subscription_redis.py)."""
        return await self._subscription.confirmed()

    async def publish(self, revocations: Sequence[Revocation]) -> None:
        if revocations:
            payload = json.dumps([[r.key_id, r.expires_at] for r in revocations])
            await self._subscription.publish(self._channel, payload)

    async def subscribe(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        """Start listening in the background (see subscription_redis.py); returns once live,
        or after `reply_within_s` anyway."""
        await self._subscription.start(
            self._channel, lambda data: on_revoked(_decode(data)), on_reset
        )

    async def aclose(self) -> None:
        await self._subscription.aclose(self._channel)


def _decode(data: bytes | str) -> list[Revocation]:
    try:
        items = json.loads(data)
        return [Revocation(str(key_id), float(expires)) for key_id, expires in items]
    except (ValueError, TypeError):
        log.warning("ignored a malformed revocation message")
        return []
