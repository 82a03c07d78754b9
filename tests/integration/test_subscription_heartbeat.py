"""A Redis subscription's heartbeat follows the traffic
(libs/gateway/leasegate/kv/subscription_redis.py): an idle process sends no PING for seconds
at a time; the first request after an idle spell does not rely on it until a PING is
answered; while requests ask, the PINGs go every heartbeat and the subscription stays
trusted. Watched from Redis's side (`CLIENT LIST`: the seconds since the subscription's
connection last sent a command)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from leasegate.kv import subscription_redis
from leasegate.kv.revocations_redis import RedisRevocationBus

pytestmark = pytest.mark.redis


async def _idle_s(client: aioredis.Redis, name: str) -> int:
    """Seconds since the connection named `name` (the subscription's) last sent a command."""
    listed = await client.client_list(_type="pubsub")
    (mine,) = [c for c in listed if c["name"] == name]
    return int(mine["idle"])


@contextlib.asynccontextmanager
async def _bus(
    redis_url: str, prefix: str, heartbeat_s: float = 0.1
) -> AsyncIterator[tuple[RedisRevocationBus, aioredis.Redis, str]]:
    """A live revocation bus on its own client; the subscription's connection named (the
    name is third)."""
    name = f"lgtest-{secrets.token_hex(4)}"
    client = aioredis.from_url(redis_url, client_name=name)
    bus = RedisRevocationBus(client, prefix, heartbeat_s=heartbeat_s)
    await bus.subscribe(lambda revoked: None, lambda: None)
    try:
        yield bus, client, name
    finally:
        await bus.aclose()
        await client.aclose()


@contextlib.asynccontextmanager
async def _commands_sent(
    redis_url: str, client: aioredis.Redis, name: str
) -> AsyncIterator[list[str]]:
    """The commands the connection named `name` sends while the block runs, as Redis's
    MONITOR saw them (told apart by its port: other tests share the server)."""
    (mine,) = [c for c in await client.client_list(_type="pubsub") if c["name"] == name]
    port = mine["addr"].rsplit(":", 1)[1]
    sent: list[str] = []
    watcher = aioredis.from_url(redis_url)
    try:
        async with watcher.monitor() as monitor:

            async def read() -> None:
                while True:
                    command = await monitor.next_command()
                    if command["client_port"] == port:
                        sent.append(command["command"].split(" ")[0].lower())

            reading = asyncio.create_task(read())
            try:
                yield sent
                await asyncio.sleep(0.2)  # the last commands reach the monitor
            finally:
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading
    finally:
        await watcher.aclose()


async def test_an_idle_subscription_stays_quiet_and_the_first_request_waits_for_a_pong(
    redis_url: str, redis_prefix: str
) -> None:
    async with _bus(redis_url, redis_prefix, heartbeat_s=0.5) as (bus, client, name):
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


async def test_requests_asking_in_bursts_further_apart_than_the_bound_find_it_trusted(
    redis_url: str, redis_prefix: str
) -> None:
    """Admissions come in bursts with only open streams between them (a fleet's long
    answers): asked less often than the silence bound (here 3 x 0.1 s), the subscription
    renews itself, so each burst relies on it instead of every request asking Redis."""
    async with _bus(redis_url, redis_prefix) as (bus, _, _):
        for _ in range(5):
            assert await bus.confirmed()  # a burst, then 0.6 s of streams: twice the bound
            await asyncio.sleep(0.6)
            assert bus.trusted()


async def test_a_burst_after_an_idle_spell_waits_for_one_pong_not_a_store_read_each(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first requests after an idle spell cannot trust the subscription until a PING is
    answered; `confirmed()` lets all of them wait for that one answer (well under a
    millisecond on a live Redis) and then rely on it."""
    monkeypatch.setattr(subscription_redis, "ASKED_WITHIN_S", 0.2)
    async with _bus(redis_url, redis_prefix) as (bus, client, name):
        await asyncio.sleep(1.0)  # idle: the 10 s idle heartbeat sends nothing meanwhile
        async with _commands_sent(redis_url, client, name) as sent:
            assert not bus.trusted()  # its last sign of life is older than the bound
            started = time.monotonic()
            answers = await asyncio.gather(*(bus.confirmed() for _ in range(50)))
            assert all(answers)
            assert time.monotonic() - started < subscription_redis.CONFIRM_WITHIN_S
        # the first ask sent one PING; the burst waited for its answer and sent none
        assert sent == ["ping"]


async def test_confirmed_is_false_at_once_for_a_subscription_that_is_down(
    redis_prefix: str,
) -> None:
    async with _bus("redis://127.0.0.1:1/0", redis_prefix) as (bus, _, _):
        started = time.monotonic()
        assert not await bus.confirmed()
        assert time.monotonic() - started < 0.05
