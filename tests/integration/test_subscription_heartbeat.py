"""A Redis subscription's heartbeat follows the traffic
(libs/gateway/leasegate/kv/subscription_redis.py): an idle process sends no PING for seconds
at a time; the first request after an idle spell does not rely on it until a PING is
answered; while requests ask, the PINGs go every heartbeat and the subscription stays
trusted. Watched from Redis's side (`CLIENT LIST`: the seconds since the subscription's
connection last sent a command)."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest
import redis.asyncio as aioredis

from leasegate.kv.revocations_redis import RedisRevocationBus

pytestmark = pytest.mark.redis


async def _idle_s(client: aioredis.Redis, name: str) -> int:
    """Seconds since the connection named `name` (the subscription's) last sent a command."""
    listed = await client.client_list(_type="pubsub")
    (mine,) = [c for c in listed if c["name"] == name]
    return int(mine["idle"])


async def test_an_idle_subscription_stays_quiet_and_the_first_request_waits_for_a_pong(
    redis_url: str, redis_prefix: str
) -> None:
    name = f"lgtest-{secrets.token_hex(4)}"
    client = aioredis.from_url(redis_url, client_name=name)
    bus = RedisRevocationBus(client, redis_prefix, heartbeat_s=0.5)
    await bus.subscribe(lambda revoked: None, lambda: None)
    try:
        assert bus.ready
        await asyncio.sleep(3.2)  # nobody asks: six heartbeats of silence
        assert await _idle_s(client, name) >= 2  # no PING sent meanwhile
        assert bus.ready  # live (readiness) all along
        assert not bus.trusted()  # its last sign of life is older than 3 heartbeats
        started = time.monotonic()
        while not bus.trusted():  # the PING that asking sent is answered
            assert time.monotonic() - started < 1.0
            await asyncio.sleep(0.005)
        ended = time.monotonic() + 3.0
        while time.monotonic() < ended:  # requests ask: PINGs every heartbeat, trusted
            assert bus.trusted()
            await asyncio.sleep(0.05)
        # Redis counts idle time in whole seconds of its clock, so a PING 0.5 s ago can read
        # 1; without PINGs while asking, the last command would be 3 s old (2 or more)
        assert await _idle_s(client, name) <= 1
    finally:
        await bus.aclose()
        await client.aclose()
