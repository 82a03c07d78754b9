"""The proxy's revocation bus and health news share one Redis subscription
(libs/gateway/leasegate/kv/buses_redis.py): one pub/sub connection, one heartbeat, each
channel's messages to its own owner, every owner reset when the connection is replaced, and
an owner that joins a live subscription reset at once. Watched from Redis's side
(`CLIENT LIST`)."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from leasegate.core.ports.health import HealthNews
from leasegate.core.ports.revocation import Revocation
from leasegate.kv.buses_redis import redis_buses
from tests.fixtures.faults import eventually

pytestmark = pytest.mark.redis


async def _until(check: Callable[[], bool]) -> None:
    async def holds() -> bool:
        return check()

    await eventually(holds, 5.0, every_s=0.02)


async def test_both_buses_listen_on_one_connection_and_each_hears_its_own(
    redis_url: str, redis_prefix: str
) -> None:
    name = f"lgtest-{secrets.token_hex(4)}"
    client = aioredis.from_url(redis_url, client_name=name)
    revocations, health = redis_buses(client, redis_prefix, reply_within_s=2.0, heartbeat_s=0.5)
    revoked: list[Revocation] = []
    news: list[HealthNews] = []
    resets = {"revocations": 0, "health": 0}

    def reset(owner: str) -> Callable[[], None]:
        def on_reset() -> None:
            resets[owner] += 1

        return on_reset

    try:
        await revocations.subscribe(revoked.extend, reset("revocations"))
        assert resets == {"revocations": 1, "health": 0}
        await health.subscribe(news.extend, reset("health"))
        assert resets == {"revocations": 1, "health": 1}  # joined live: reset at once
        listed = [c for c in await client.client_list(_type="pubsub") if c["name"] == name]
        assert [int(c["sub"]) for c in listed] == [2]  # one connection, both channels

        await revocations.publish([Revocation("k1", 2e9)])
        await health.publish([HealthNews("acct", "m", 2e9)])
        await _until(lambda: bool(revoked) and bool(news))
        assert [r.key_id for r in revoked] == ["k1"]
        assert [(n.account_id, n.model) for n in news] == [("acct", "m")]

        # the connection is cut: both owners are reset when it is replaced
        await client.client_kill_filter(_id=listed[0]["id"])
        await _until(lambda: resets == {"revocations": 2, "health": 2})
        assert revocations.ready
        assert health.ready

        # one owner done: the other still hears its channel
        await revocations.aclose()
        await health.publish([HealthNews("acct", None, 2e9)])
        await _until(lambda: len(news) == 2)
        assert news[-1].model is None
    finally:
        await revocations.aclose()
        await health.aclose()
        await client.aclose()
    assert not [c for c in await _pubsub(redis_url) if c["name"] == name]  # all closed


async def _pubsub(redis_url: str) -> list[dict[str, str]]:
    watcher = aioredis.from_url(redis_url)
    try:
        return list(await watcher.client_list(_type="pubsub"))
    finally:
        await watcher.aclose()
