"""Quota news between two proxies on one real Redis: each proxy has its own client, quota view
and health-news subscription, and they share only the Redis server. A pair one proxy finds
exhausted (a rate-limit 429, or an answer whose headers leave no room for a request like it)
is refused by the other before it sends anything, within one pub/sub delivery, without
waiting for the store's periodic write and read (both set to an hour here). A pair with room
makes no news."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from leasegate.core.clock import SystemClock
from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.kv.health_fanout_redis import RedisHealthFanout
from leasegate.kv.quota_redis import RedisQuotaStore
from leasegate.providers import Usage
from leasegate.proxy.quota_view import QuotaView
from leasegate.routing.quota import Estimate
from tests.fixtures.quota import REGISTRY

pytestmark = pytest.mark.redis

COST = Estimate(100, 100)
HOUR = 3600.0


@dataclass
class Proxy:
    view: QuotaView
    fanout: RedisHealthFanout
    client: aioredis.Redis


@pytest.fixture
async def proxies(redis_url: str, redis_prefix: str) -> AsyncIterator[tuple[Proxy, Proxy]]:
    made: list[Proxy] = []
    for _ in range(2):
        client = aioredis.from_url(redis_url)
        fanout = RedisHealthFanout(client, redis_prefix)
        view = QuotaView(
            RedisQuotaStore(client, redis_prefix),
            REGISTRY,
            SystemClock(),
            flush_s=HOUR,
            refresh_s=HOUR,
            news=fanout,
        )
        await view.start()  # registers for quota news before the subscription starts
        await fanout.subscribe(lambda news: None, lambda: None)  # the health view's part
        assert fanout.ready
        made.append(Proxy(view, fanout, client))
    try:
        yield made[0], made[1]
    finally:
        for proxy in made:
            await proxy.view.stop()
            await proxy.fanout.aclose()
            await proxy.client.aclose()


async def heard(proxy: Proxy, within_s: float = 2.0) -> float:
    """Wait until the proxy's view refuses a request on the pair; how long it took."""
    started = time.monotonic()
    while proxy.view.admit("a", "m", COST, time.time()) is None:
        elapsed = time.monotonic() - started
        assert elapsed < within_s, "the news never arrived"
        proxy.view.unsent("a", "m", COST, time.time())  # the probe's estimate goes back
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def test_a_rate_limit_429_on_one_proxy_is_refused_by_the_other_at_once(
    proxies: tuple[Proxy, Proxy],
) -> None:
    one, other = proxies
    now = time.time()
    assert other.view.admit("a", "m", COST, now) is None  # nothing known yet: admitted
    other.view.unsent("a", "m", COST, now)
    until = one.view.rate_limited("a", "m", {}, 30.0, now)
    took = await heard(other)
    assert took < 1.0  # one pub/sub delivery, not the hour-long refresh
    when = other.view.admit("a", "m", COST, time.time())
    assert when == pytest.approx(until)


async def test_headers_leaving_no_room_are_news_and_headers_with_room_are_not(
    proxies: tuple[Proxy, Proxy],
) -> None:
    one, other = proxies
    now = time.time()
    roomy: dict[QuotaDimension, Bucket] = {
        "requests": Bucket(100, 50, now + 60),
        "tokens": Bucket(100_000, 50_000, now + 60),
    }
    assert one.view.admit("a", "m", COST, now, ref="r1") is None
    one.view.answered("a", "m", roomy, COST, Usage(), now, ref="r1")
    await asyncio.sleep(0.3)
    assert other.view.quota("a", "m") is None  # no news: the other knows nothing of the pair
    drained: dict[QuotaDimension, Bucket] = {
        "requests": Bucket(100, 50, now + 60),
        # less than a request like this one (200), refilling by 28 a second
        "tokens": Bucket(100_000, 150, now + HOUR),
    }
    assert one.view.admit("a", "m", COST, now, ref="r2") is None
    one.view.answered("a", "m", drained, COST, Usage(), now, ref="r2")
    await heard(other)
    stated = other.view.quota("a", "m")
    assert stated is not None
    assert stated.buckets["tokens"].remaining == 150
