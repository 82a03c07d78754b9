"""One contract for request slots, run against the in-process tables and against real Redis."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import pytest

from leasegate.core.clock import SystemClock, from_epoch
from leasegate.core.ports.capacity import RequestSlots
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.kv.connect import Deadlines
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.slot_keeper import SlotKeeper
from leasegate.kv.slots_memory import InProcessRequestSlots
from leasegate.kv.slots_redis import RedisRequestSlots
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

LEASE_S = 30.0
T0 = 1_750_000_000.0


REDIS_KINDS = [
    pytest.param("redis_url", id="redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster_url", id="redis-cluster", marks=pytest.mark.redis),
]


@pytest.fixture(params=REDIS_KINDS)
async def redis_client(request: pytest.FixtureRequest) -> AsyncIterator[RedisClient]:
    """A single Redis, then a three-master cluster (the prefix's keys go with the cluster)."""
    client = connect(request.getfixturevalue(request.param))
    yield client
    await client.aclose()


@pytest.fixture(params=["memory", *REDIS_KINDS])
async def slots(request: pytest.FixtureRequest) -> AsyncIterator[RequestSlots]:
    if request.param == "memory":
        yield InProcessRequestSlots(LEASE_S)
        return
    # Built here rather than from the async redis fixtures, which a parametrized async
    # fixture cannot request lazily; this mirrors redis_prefix's clean-up.
    # Room for every racer at once: the point is 200 scripts racing inside Redis. Deadlines
    # far above the gateway's 2 s: 200 connections opened at once on a loaded machine (a cluster
    # opens them lazily, inside the race) must not turn into refusals the test is not about.
    client = connect(
        request.getfixturevalue(request.param),
        max_connections=256,
        deadlines=Deadlines(connect_s=20.0, command_s=20.0),
    )
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        yield RedisRequestSlots(client, prefix, LEASE_S)
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


class FakeClock:
    def __init__(self, epoch: float) -> None:
        self.epoch = epoch

    def now(self) -> datetime:
        return from_epoch(self.epoch)

    def monotonic(self) -> float:
        return self.epoch


async def test_the_ceiling_refuses_the_next_holder_at_once(slots: RequestSlots) -> None:
    results = [await slots.acquire("acct", f"r{i}", 3, T0) for i in range(4)]
    assert results == [True, True, True, False]
    assert await slots.in_flight(["acct"], T0) == {"acct": 3}


async def test_a_zero_ceiling_admits_nobody(slots: RequestSlots) -> None:
    assert not await slots.acquire("acct", "r", 0, T0)
    assert await slots.in_flight(["acct"], T0) == {"acct": 0}


async def test_acquiring_one_holder_twice_takes_one_slot(slots: RequestSlots) -> None:
    assert await slots.acquire("acct", "r1", 2, T0)
    assert await slots.acquire("acct", "r1", 2, T0 + 1)
    assert await slots.in_flight(["acct"], T0 + 1) == {"acct": 1}
    assert await slots.acquire("acct", "r2", 2, T0 + 1)


async def test_five_releases_return_one_slot(slots: RequestSlots) -> None:
    await slots.acquire("acct", "r1", 1, T0)
    assert [await slots.release("acct", ["r1"]) for _ in range(5)] == [1, 0, 0, 0, 0]
    assert await slots.acquire("acct", "r2", 1, T0)
    assert not await slots.acquire("acct", "r3", 1, T0)


async def test_one_release_returns_several_holders_and_counts_only_theirs(
    slots: RequestSlots,
) -> None:
    for holder in ("r1", "r2", "r3"):
        await slots.acquire("acct", holder, 3, T0)
    assert await slots.release("acct", ["r1", "r3", "stranger", "r1"]) == 2
    assert await slots.in_flight(["acct"], T0) == {"acct": 1}
    assert await slots.release("acct", []) == 0


async def test_releasing_a_stranger_does_nothing(slots: RequestSlots) -> None:
    await slots.acquire("acct", "r1", 1, T0)
    assert await slots.release("acct", ["stranger"]) == 0
    assert await slots.release("other-acct", ["r1"]) == 0
    assert await slots.in_flight(["acct"], T0) == {"acct": 1}


async def test_a_holder_that_stops_renewing_is_reclaimed_after_the_lease(
    slots: RequestSlots,
) -> None:
    await slots.acquire("acct", "dead", 1, T0)
    assert not await slots.acquire("acct", "r2", 1, T0 + LEASE_S - 0.01)
    assert await slots.in_flight(["acct"], T0 + LEASE_S) == {"acct": 0}
    assert await slots.acquire("acct", "r2", 1, T0 + LEASE_S)
    await slots.renew("acct", ["dead"], T0 + LEASE_S + 1)
    assert await slots.in_flight(["acct"], T0 + LEASE_S + 1) == {"acct": 1}


async def test_renewal_keeps_only_the_renewed_holders(slots: RequestSlots) -> None:
    await slots.acquire("acct", "stream", 2, T0)
    await slots.acquire("acct", "quiet", 2, T0)
    for step in (10.0, 20.0, 30.0 - 0.5):
        await slots.renew("acct", ["stream", "never-reserved"], T0 + step)
    later = T0 + LEASE_S + 5
    assert await slots.in_flight(["acct"], later) == {"acct": 1}
    assert await slots.acquire("acct", "next", 2, later)
    assert not await slots.acquire("acct", "one-too-many", 2, later)
    assert await slots.release("acct", ["never-reserved"]) == 0


async def test_in_flight_counts_accounts_apart_in_one_answer(slots: RequestSlots) -> None:
    await slots.acquire("a", "r1", 5, T0)
    await slots.acquire("a", "r2", 5, T0)
    await slots.acquire("b", "r1", 1, T0)
    assert not await slots.acquire("b", "r2", 1, T0)
    assert await slots.in_flight(["a", "b", "unknown"], T0) == {"a": 2, "b": 1, "unknown": 0}
    assert await slots.in_flight([], T0) == {}


async def test_two_hundred_racing_requests_admit_exactly_the_ceiling(
    slots: RequestSlots,
) -> None:
    start = asyncio.Event()

    async def one(i: int) -> bool:
        await start.wait()
        return await slots.acquire("acct", f"r{i}", 5, T0)

    racers = [asyncio.create_task(one(i)) for i in range(200)]
    await asyncio.sleep(0)
    start.set()
    admitted = await asyncio.gather(*racers)
    assert sum(admitted) == 5
    assert await slots.in_flight(["acct"], T0) == {"acct": 5}


async def test_redis_slots_key_expires_with_the_lease(
    redis_client: RedisClient, redis_prefix: str
) -> None:
    slots = RedisRequestSlots(redis_client, redis_prefix, lease_s=LEASE_S)
    await slots.acquire("acct", "r1", 2, T0)
    ttl_ms = await redis_client.pttl(slots.key("acct"))
    assert 0 < ttl_ms <= LEASE_S * 1000
    await slots.release("acct", ["r1"])
    assert await redis_client.exists(slots.key("acct")) == 0


# The keeper is what the proxy holds; it must behave the same over either store.


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 1, 1, tzinfo=UTC).timestamp())


async def test_keeper_counts_nothing_without_a_ceiling(
    slots: RequestSlots, clock: FakeClock
) -> None:
    keeper = SlotKeeper(slots, clock)
    assert all([await keeper.acquire("acct", f"r{i}", None) for i in range(50)])
    assert await slots.in_flight(["acct"], clock.epoch) == {"acct": 0}
    assert keeper.holding("acct") == 0
    await keeper.release("acct", "r1")


async def test_keeper_release_is_idempotent(slots: RequestSlots, clock: FakeClock) -> None:
    keeper = SlotKeeper(slots, clock)
    assert await keeper.acquire("acct", "r1", 1)
    assert not await keeper.acquire("acct", "r2", 1)
    for _ in range(3):
        await keeper.release("acct", "r1")
    await keeper.release("acct", "stranger")
    assert await slots.in_flight(["acct"], clock.epoch) == {"acct": 0}
    assert keeper.holding("acct") == 0


class CountedSlots(InProcessRequestSlots):
    """The in-process store, keeping the releases it was asked for (one entry per call)."""

    def __init__(self, lease_s: float) -> None:
        super().__init__(lease_s)
        self.release_calls: list[tuple[str, list[str]]] = []

    async def release(self, account_id: str, holders: Sequence[str]) -> int:
        self.release_calls.append((account_id, list(holders)))
        return await super().release(account_id, holders)


async def test_requests_ending_together_have_every_slot_back_when_their_release_returns(
    slots: RequestSlots, clock: FakeClock
) -> None:
    keeper = SlotKeeper(slots, clock)
    holders = [("a", f"r{i}") for i in range(6)] + [("b", f"s{i}") for i in range(3)]
    for account, holder in holders:
        assert await keeper.acquire(account, holder, 6)
    await asyncio.gather(*(keeper.release(account, holder) for account, holder in holders))
    # every slot is back by the time each caller's release returned
    assert await slots.in_flight(["a", "b"], clock.epoch) == {"a": 0, "b": 0}
    assert keeper.holding("a") == keeper.holding("b") == 0


async def test_releases_of_one_turn_are_one_store_call_per_account(clock: FakeClock) -> None:
    slots = CountedSlots(LEASE_S)
    keeper = SlotKeeper(slots, clock)
    for i in range(4):
        await keeper.acquire("a", f"r{i}", 8)
    await keeper.acquire("b", "s0", 8)
    await asyncio.gather(
        *(keeper.release("a", f"r{i}") for i in range(4)), keeper.release("b", "s0")
    )
    assert sorted(slots.release_calls) == [("a", ["r0", "r1", "r2", "r3"]), ("b", ["s0"])]
    await keeper.release("a", "r9")  # never held: no call
    await keeper.acquire("a", "late", 8)
    await keeper.release("a", "late")  # alone in its turn: a call of its own
    assert slots.release_calls[-1] == ("a", ["late"])
    assert len(slots.release_calls) == 3


async def test_keeper_renewal_outlives_the_lease_and_stop_gives_back(
    slots: RequestSlots, clock: FakeClock
) -> None:
    keeper = SlotKeeper(slots, clock)
    await keeper.acquire("acct", "stream", 1)
    for _ in range(6):  # three leases' worth of renewals
        clock.epoch += slots.lease_s / 2
        await keeper.renew_held()
    assert await slots.in_flight(["acct"], clock.epoch) == {"acct": 1}
    await keeper.stop()
    assert await slots.in_flight(["acct"], clock.epoch) == {"acct": 0}


async def test_a_cancelled_release_still_returns_the_slot(
    slots: RequestSlots, clock: FakeClock
) -> None:
    keeper = SlotKeeper(slots, clock)
    await keeper.acquire("acct", "aborted", 1)

    async def request_that_is_cancelled() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await keeper.release("acct", "aborted")

    task = asyncio.create_task(request_that_is_cancelled())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await keeper.stop()
    assert await slots.in_flight(["acct"], clock.epoch) == {"acct": 0}


async def test_keeper_background_renewal_on_a_real_clock(
    redis_client: RedisClient, redis_prefix: str
) -> None:
    # A lease of 1 s held for 2.5 s: it lives only if renewed at least twice. (0.3 s held for
    # 0.9 s failed now and then on a loaded 2-core machine: a renewal could come late.)
    slots = RedisRequestSlots(redis_client, redis_prefix, lease_s=1.0)
    keeper = SlotKeeper(slots, SystemClock())
    keeper.start()
    await keeper.acquire("acct", "stream", 1)
    await asyncio.sleep(2.5)
    now = datetime.now(UTC).timestamp()
    assert await slots.in_flight(["acct"], now) == {"acct": 1}
    await keeper.stop()
    assert await slots.in_flight(["acct"], now) == {"acct": 0}


async def test_keeper_release_survives_a_store_error(
    redis_client: RedisClient,
    redis_prefix: str,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    slots = RedisRequestSlots(redis_client, redis_prefix, lease_s=LEASE_S)
    keeper = SlotKeeper(slots, clock)
    await keeper.acquire("acct", "r1", 2)
    await keeper.acquire("acct", "r2", 2)
    # A real store error: the key now holds the wrong type, so ZREM and the renewal fail.
    await redis_client.set(slots.key("acct"), "clobbered")
    with caplog.at_level(logging.WARNING, logger="leasegate.kv.slot_keeper"):
        await keeper.release("acct", "r1")  # fails; retried in the background
        await keeper.renew_held()
        assert keeper.holding("acct") == 1
        await keeper.stop()  # the retry gives up: the lease reclaims the slot
    assert "their lease reclaims them" in caplog.text
    assert "renewal failed" in caplog.text


async def test_keeper_retries_a_failed_release_until_it_lands(
    redis_client: RedisClient, redis_prefix: str, clock: FakeClock
) -> None:
    slots = RedisRequestSlots(redis_client, redis_prefix, lease_s=LEASE_S)
    keeper = SlotKeeper(slots, clock)
    assert await keeper.acquire("acct", "r1", 2)
    key = slots.key("acct")
    hidden = f"{key}:hidden"  # the same hash tag: one slot on a cluster too
    await redis_client.rename(key, hidden)
    await redis_client.set(key, "clobbered")  # the store fails every release for now
    started = time.monotonic()
    await keeper.release("acct", "r1")
    assert time.monotonic() - started < 1.0  # the request does not wait for the retries
    await redis_client.delete(key)
    await redis_client.rename(hidden, key)  # the store is back, the slot still counted
    deadline = time.monotonic() + 5
    while await redis_client.zscore(key, "r1") is not None:
        assert time.monotonic() < deadline, "the failed release never landed"
        await asyncio.sleep(0.05)
    await keeper.stop()


async def test_keeper_acquire_fails_loudly_and_holds_nothing_on_a_store_error(
    redis_client: RedisClient, redis_prefix: str, clock: FakeClock
) -> None:
    slots = RedisRequestSlots(redis_client, redis_prefix, lease_s=LEASE_S)
    keeper = SlotKeeper(slots, clock)
    await redis_client.set(slots.key("acct"), "clobbered")
    with pytest.raises(StoreUnavailable):
        await keeper.acquire("acct", "r1", 1)
    assert keeper.holding("acct") == 0
    assert await keeper.acquire("acct", "r1", None)
