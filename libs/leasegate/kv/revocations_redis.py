"""Revocation fan-out over Redis pub/sub, shared by every control-plane and proxy replica.

Pub/sub is fire-and-forget, so a subscriber that loses its connection may miss messages:
on every (re)connect it calls `on_reset`, and the proxy drops its key cache, falling back to
the database (which always knows) until the cache warms again.

The subscription never holds up start-up: it runs in the background, reconnects with backoff
(0.5 s doubling to 5 s; one log line when it goes down, then one a minute), and pings Redis
every 2 s, so a partitioned connection that stays open but silent is noticed and replaced.
`ready` is false while it is down; /readyz reports it under `redis`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from leasegate.core.ports.revocation import OnReset, OnRevoked, Revocation

log = logging.getLogger("leasegate.revocations")

_FIRST_RETRY_S = 0.5
_MAX_RETRY_S = 5.0
"""Reconnection backs off from 0.5 s to 5 s: a Redis that returns is used within 5 s."""
_STILL_DOWN_LOG_EVERY_S = 60.0
_POLL_S = 1.0
_PING_EVERY_S = 2.0


class RedisRevocationBus:
    def __init__(self, client: aioredis.Redis, prefix: str, *, reply_within_s: float = 2.0) -> None:
        self._client = client
        self._channel = f"{prefix}:revocations"
        self._task: asyncio.Task[None] | None = None
        self._reply_within_s = reply_within_s
        self._silent_after_s = _PING_EVERY_S + reply_within_s
        self._went_live = asyncio.Event()
        self._wanted = False
        self._live = False

    @property
    def ready(self) -> bool:
        """False while a subscription is wanted and not live (revocations could be missed)."""
        return self._live or not self._wanted

    async def publish(self, revocations: Sequence[Revocation]) -> None:
        if not revocations:
            return
        payload = json.dumps([[r.key_id, r.expires_at] for r in revocations])
        await self._client.publish(self._channel, payload)

    async def subscribe(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        """Start listening in the background; return once live, or after `reply_within_s`
        anyway: a process started while Redis is down still binds its port, and `ready`
        turns true when the subscription is live."""
        self._wanted = True
        self._went_live = asyncio.Event()
        self._task = asyncio.create_task(self._listen(on_revoked, on_reset), name="revocations")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._reply_within_s):
                await self._went_live.wait()

    async def _listen(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        loop = asyncio.get_running_loop()
        delay, down_since, logged_at = _FIRST_RETRY_S, None, 0.0
        while True:
            try:
                await self._deliver(on_revoked, on_reset, restored=down_since is not None)
            except (RedisError, OSError) as exc:
                self._live = False
                now = loop.time()
                if down_since is None or now - logged_at >= _STILL_DOWN_LOG_EVERY_S:
                    # the store's name and the error's type: never the URL (credentials)
                    log.warning(
                        "revocation subscription down; retrying with backoff",
                        extra={"store": "redis", "error": type(exc).__name__},
                    )
                    logged_at = now
                down_since = down_since if down_since is not None else now
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_S)
                continue
            delay, down_since = _FIRST_RETRY_S, None

    async def _deliver(self, on_revoked: OnRevoked, on_reset: OnReset, *, restored: bool) -> None:
        """Listen until the connection fails or goes silent (a partition): then raise."""
        loop = asyncio.get_running_loop()
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._channel)
            on_reset()
            self._live = True
            self._went_live.set()
            if restored:
                log.info("revocation subscription restored", extra={"store": "redis"})
            heard = pinged = loop.time()
            while True:
                message = await pubsub.get_message(timeout=_POLL_S)
                now = loop.time()
                if message is not None:
                    heard = now
                    if message.get("type") == "message":
                        on_revoked(_decode(message["data"]))
                if now - pinged >= _PING_EVERY_S:
                    await pubsub.ping()
                    pinged = now
                if now - heard > self._silent_after_s:
                    raise TimeoutError("the revocation subscription stopped answering")
        finally:
            self._live = False
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
