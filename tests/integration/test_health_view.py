"""The proxy's local health view: healthy pairs cost no store call, failures are counted in
the store exactly as before, news reaches every view. Two views stand for two proxies: on
Redis they share only the Redis server (store and pub/sub), in-process they share the twins.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from leasegate.accounts import Account, Registry
from leasegate.core.clock import SystemClock
from leasegate.core.observation import Classification
from leasegate.core.ports.health import (
    Admitted,
    Cooldown,
    HealthFanout,
    HealthNews,
    HealthPolicy,
    HealthSnapshot,
    HealthStore,
    HealthTransition,
)
from leasegate.kv.fanout_memory import InProcessHealthFanout
from leasegate.kv.health_fanout_redis import RedisHealthFanout
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.kv.health_redis import RedisHealthStore
from leasegate.proxy.health_view import HealthView
from tests.fixtures.services import delete_prefix

POLICY = HealthPolicy(
    failure_threshold=3, account_failure_threshold=2, base_cooldown_s=30, max_cooldown_s=600
)
OK = Classification("success", None, False, None, resets_streak=True)
OVERLOADED = Classification("upstream-error", "model", True, "http-503")
BAD_KEY = Classification("upstream-error", "account", True, "invalid_api_key")
REGISTRY = Registry(
    (
        Account(
            id="acct",
            provider="openai",
            base_url="http://127.0.0.1:1",
            credential_env="LEASEGATE_CRED_ACCT",
            models={"gpt-4o": "gpt-4o"},
            configured=True,
        ),
    )
)


class Counted:
    """A real store, counting the calls made to it (what the view is meant to save)."""

    def __init__(self, store: HealthStore) -> None:
        self.store = store
        self.calls = 0

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        self.calls += 1
        return await self.store.snapshot(pairs, now)

    async def admit(self, account_id: str, served_model: str, now: float) -> Admitted | Cooldown:
        self.calls += 1
        return await self.store.admit(account_id, served_model, now)

    async def record(
        self,
        account_id: str,
        served_model: str,
        classification: Classification,
        retry_after_s: float | None,
        now: float,
        *,
        trial: Admitted | None = None,
    ) -> list[HealthTransition]:
        self.calls += 1
        return await self.store.record(
            account_id, served_model, classification, retry_after_s, now, trial=trial
        )

    async def aclose(self) -> None:
        await self.store.aclose()


@dataclass
class Proxies:
    """Two views over one shared store, as two proxy processes would have."""

    a: HealthView
    b: HealthView
    store_a: Counted
    store_b: Counted
    raw: HealthStore
    """The store itself, for reading the truth."""


@pytest.fixture(params=["in-process", pytest.param("redis", marks=pytest.mark.redis)])
async def proxies(request: pytest.FixtureRequest) -> AsyncIterator[Proxies]:
    clients: list[aioredis.Redis] = []
    prefix = ""
    fanouts: list[HealthFanout]
    if request.param == "in-process":
        memory = InProcessHealthStore(POLICY)
        shared = InProcessHealthFanout()
        stores: list[HealthStore] = [memory, memory]
        fanouts = [shared, shared]
        raw: HealthStore = memory
    else:
        url = request.getfixturevalue("redis_url")
        # redis_prefix is an async fixture, which getfixturevalue cannot set up from here
        prefix = f"lgtest:{secrets.token_hex(4)}"
        clients = [aioredis.from_url(url) for _ in range(3)]
        stores = [RedisHealthStore(c, prefix, POLICY) for c in clients[:2]]
        fanouts = [RedisHealthFanout(c, prefix) for c in clients[:2]]
        raw = RedisHealthStore(clients[2], prefix, POLICY)
    counted = [Counted(s) for s in stores]
    views = [
        HealthView(c, f, REGISTRY, SystemClock()) for c, f in zip(counted, fanouts, strict=True)
    ]
    for view in views:
        await view.start()
    for c in counted:
        c.calls = 0
    try:
        yield Proxies(views[0], views[1], counted[0], counted[1], raw)
    finally:
        for view in views:
            await view.stop()
        for client in clients:
            await client.aclose()
        if clients:
            await delete_prefix(prefix)


async def until(condition: object, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, "the news never arrived"
        await asyncio.sleep(0.005)


async def test_a_healthy_pair_costs_no_store_call(proxies: Proxies) -> None:
    now = time.time()
    # A fresh view does not know what streaks ran before it: its first success resets them.
    assert await proxies.a.record("acct", "gpt-4o", OK, None, now) == []
    assert proxies.store_a.calls == 1
    proxies.store_a.calls = 0
    for _ in range(50):
        assert isinstance(await proxies.a.admit("acct", "gpt-4o", now), Admitted)
        assert await proxies.a.record("acct", "gpt-4o", OK, None, now) == []
    assert proxies.store_a.calls == 0


async def test_a_cooldown_opened_by_one_proxy_is_refused_by_the_other(proxies: Proxies) -> None:
    now = time.time()
    for _ in range(3):
        await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    await until(lambda: (proxies.b.watched("acct", "gpt-4o") or 0.0) > now)
    refused = await proxies.b.admit("acct", "gpt-4o", now)
    assert isinstance(refused, Cooldown)
    assert refused.model == "gpt-4o"


async def test_an_open_circuit_is_seen_by_the_other_proxy(proxies: Proxies) -> None:
    now = time.time()
    for _ in range(2):
        await proxies.a.record("acct", "gpt-4o", BAD_KEY, None, now)
    await until(lambda: (proxies.b.watched("acct", None) or 0.0) > now)
    refused = await proxies.b.admit("acct", "gpt-4o", now)
    assert isinstance(refused, Cooldown)
    assert refused.model is None


async def test_a_success_elsewhere_resets_the_streak_once(proxies: Proxies) -> None:
    now = time.time()
    await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    await until(lambda: proxies.b.watched("acct", "gpt-4o") == 0.0)
    await proxies.b.record("acct", "gpt-4o", OK, None, now)
    await proxies.b.record("acct", "gpt-4o", OK, None, now)
    assert proxies.store_b.calls == 1, "one reset, then the pair is clean again"
    # Two more failures do not trip: the success in between reset the streak in the store.
    await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    truth = await proxies.raw.snapshot([("acct", "gpt-4o")], now)
    assert truth.cooling_for("acct", "gpt-4o") is None


async def test_failures_are_still_counted_exactly_in_the_store(proxies: Proxies) -> None:
    now = time.time()
    await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    await proxies.b.record("acct", "gpt-4o", OVERLOADED, None, now)
    transitions = await proxies.a.record("acct", "gpt-4o", OVERLOADED, None, now)
    assert [t.kind for t in transitions] == ["cooldown-started"]


async def test_a_cooldown_older_than_the_view_is_honoured(
    proxies: Proxies,
) -> None:
    now = time.time()
    for _ in range(3):
        await proxies.raw.record("acct", "gpt-4o", OVERLOADED, None, now)
    late = HealthView(proxies.raw, InProcessHealthFanout(), REGISTRY, SystemClock())
    await late.start()
    try:
        refused = await late.admit("acct", "gpt-4o", time.time())
        assert isinstance(refused, Cooldown)
    finally:
        await late.stop()


async def test_while_the_news_cannot_arrive_every_request_asks_the_store() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    client = aioredis.from_url(f"redis://127.0.0.1:{closed_port}/0")
    counted = Counted(InProcessHealthStore(POLICY))
    fanout = RedisHealthFanout(client, "lgtest:down", reply_within_s=0.2)
    view = HealthView(counted, fanout, REGISTRY, SystemClock())
    await view.start()
    try:
        assert not fanout.ready
        now = time.time()
        for _ in range(3):
            assert isinstance(await view.admit("acct", "gpt-4o", now), Admitted)
        assert counted.calls == 3
    finally:
        await view.stop()
        await client.aclose()


class Gated(Counted):
    """A real store whose snapshots wait until the test lets them answer."""

    def __init__(self, store: HealthStore) -> None:
        super().__init__(store)
        self.gate = asyncio.Event()

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        await self.gate.wait()
        return await super().snapshot(pairs, now)


async def test_news_heard_while_the_store_is_reread_is_kept() -> None:
    fanout = InProcessHealthFanout()
    gated = Gated(InProcessHealthStore(POLICY))
    view = HealthView(gated, fanout, REGISTRY, SystemClock())
    starting = asyncio.create_task(view.start())
    await asyncio.sleep(0.01)  # the re-read is waiting on the store
    until = time.time() + 30
    await fanout.publish([HealthNews("acct", "gpt-4o", until)])
    gated.gate.set()
    await starting
    try:
        assert view.watched("acct", "gpt-4o") == until
        assert view.watched("acct", None) == 0.0
    finally:
        await view.stop()


class Confirming(InProcessHealthFanout):
    """A subscription not heard from lately: a request must wait for its heartbeat's
    answer, and `news` is delivered ahead of that answer (as pub/sub orders them)."""

    def __init__(self) -> None:
        super().__init__()
        self.news: list[HealthNews] = []

    def trusted(self) -> bool:
        return False

    async def confirmed(self) -> bool:
        await self.publish(self.news)
        return True


async def test_a_cooldown_heard_while_a_request_waits_for_the_heartbeat_is_refused() -> None:
    store = InProcessHealthStore(POLICY)
    fanout = Confirming()
    counted = Counted(store)
    view = HealthView(counted, fanout, REGISTRY, SystemClock())
    await view.start()
    counted.calls = 0
    try:
        now = time.time()
        # confirmed, and nothing known against the pair: no store call
        assert isinstance(await view.admit("acct", "gpt-4o", now), Admitted)
        assert counted.calls == 0
        # another proxy opens a cooldown; its news arrives while the next request waits
        for _ in range(3):
            await store.record("acct", "gpt-4o", OVERLOADED, None, now)
        fanout.news = [HealthNews("acct", "gpt-4o", now + 30)]
        assert isinstance(await view.admit("acct", "gpt-4o", now), Cooldown)
    finally:
        await view.stop()
