"""One contract for the running spend totals, run against the in-process store, a single
Redis and a three-master cluster: an unknown total is None (never 0), a rebase with a cut-off
counts each request once, a racing rebuilder loses cleanly, and a total whose data was lost
(its key deleted, as a restart without persistence does) reads unknown again. A Hypothesis
check holds each Redis to the in-process store (`RunningTotal`) on any history."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leasegate.core.ports.spend import ChainSpend
from leasegate.kv.keys import chain_spend_key
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.spend_memory import InProcessChainSpend
from leasegate.kv.spend_redis import RedisChainSpend
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

T0 = 1_750_000_000.0
KEEP_S = 3600.0

REDIS_KINDS = [
    pytest.param("redis_url", id="redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster_url", id="redis-cluster", marks=pytest.mark.redis),
]


class Lossy:
    """A store and the way to lose its data (Redis: the key is gone)."""

    def __init__(
        self, store: ChainSpend, client: RedisClient | None = None, prefix: str = ""
    ) -> None:
        self.store = store
        self._client = client
        self._prefix = prefix

    async def lose(self, total_id: str) -> None:
        if self._client is not None:
            await self._client.delete(chain_spend_key(self._prefix, total_id))
        else:
            assert isinstance(self.store, InProcessChainSpend)
            self.store._totals.pop(total_id, None)


@pytest.fixture(params=["memory", *REDIS_KINDS])
async def lossy(request: pytest.FixtureRequest) -> AsyncIterator[Lossy]:
    if request.param == "memory":
        yield Lossy(InProcessChainSpend())
        return
    client = connect(request.getfixturevalue(request.param))
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        yield Lossy(RedisChainSpend(client, prefix), client, prefix)
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


async def test_an_unknown_total_is_none_and_a_rebase_makes_it_known(lossy: Lossy) -> None:
    store = lossy.store
    assert await store.spent("t") is None
    assert not await store.kept("t")
    assert await store.rebase("t", T0, 100, 5, KEEP_S, only_if_unknown=True) == (100, 5)
    assert await store.spent("t") == (100, 5)
    await store.add("t", 16, 2, T0 + 0.5, KEEP_S)
    assert await store.spent("t") == (116, 7)


async def test_a_row_started_before_the_cutoff_is_left_to_the_evidence(lossy: Lossy) -> None:
    store = lossy.store
    await store.rebase("t", T0, 100, 0, KEEP_S, only_if_unknown=True)
    await store.add("t", 16, 0, T0 - 0.001, KEEP_S)  # in the base already
    await store.add("t", 16, 0, T0, KEEP_S)
    assert await store.spent("t") == (116, 0)


async def test_racing_rebuilders_agree_on_the_first(lossy: Lossy) -> None:
    store = lossy.store
    first, second = await asyncio.gather(
        store.rebase("t", T0, 100, 1, KEEP_S, only_if_unknown=True),
        store.rebase("t", T0 + 1, 116, 2, KEEP_S, only_if_unknown=True),
    )
    assert first == second
    assert await store.spent("t") == first


async def test_a_lost_total_keeps_what_finishes_after_the_loss(lossy: Lossy) -> None:
    store = lossy.store
    await store.rebase("t", T0, 100, 0, KEEP_S, only_if_unknown=True)
    await store.add("t", 16, 0, T0 + 1, KEEP_S)
    await lossy.lose("t")
    assert await store.spent("t") is None  # unknown, not zero
    await store.add("t", 16, 0, T0 + 5.2, KEEP_S)  # finishes after the loss: kept
    await store.add("t", 16, 0, T0 + 9.9, KEEP_S)
    assert await store.spent("t") is None
    assert await store.kept("t")
    # the rebuild: evidence of rows started before T0 + 6 (132 tokens), plus what was kept since
    assert await store.rebase("t", T0 + 6, 132, 0, KEEP_S, only_if_unknown=True) == (148, 0)


async def test_reconciling_moves_the_cutoff_forward_only(lossy: Lossy) -> None:
    store = lossy.store
    await store.rebase("t", T0, 0, 0, KEEP_S, only_if_unknown=True)
    for second in (1, 2, 3):
        await store.add("t", 10, 1, T0 + second + 0.5, KEEP_S)
    assert await store.spent("t") == (30, 3)
    # drift: a lost add the evidence has (rows started before T0 + 2: 10 tokens + a lost 7)
    assert await store.rebase("t", T0 + 2, 17, 1, KEEP_S, only_if_unknown=False) == (37, 3)
    # an older cut-off never undoes a newer one
    assert await store.rebase("t", T0 + 1, 0, 0, KEEP_S, only_if_unknown=False) == (37, 3)
    assert await store.rebase("t", T0 + 1, 0, 0, KEEP_S, only_if_unknown=True) == (37, 3)
    # the same cut-off again is idempotent
    assert await store.rebase("t", T0 + 2, 17, 1, KEEP_S, only_if_unknown=False) == (37, 3)


Op = tuple[str, int, float]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "rebuild", "reconcile", "lose"]),
        st.integers(min_value=0, max_value=5000),
        st.floats(min_value=0, max_value=30, allow_nan=False),
    ),
    max_size=25,
)


async def _run_both(url: str, ops: list[Op]) -> None:
    client = connect(url)
    prefix = f"lgtest:{secrets.token_hex(4)}"
    memory = Lossy(InProcessChainSpend())
    shared = Lossy(RedisChainSpend(client, prefix), client, prefix)
    try:
        for kind, amount, offset in ops:
            at = T0 + offset
            for side in (memory, shared):
                if kind == "add":
                    await side.store.add("t", amount, amount * 3, at, KEEP_S)
                elif kind == "lose":
                    await side.lose("t")
            if kind in ("rebuild", "reconcile"):
                cutoff = float(int(at))
                only = kind == "rebuild"
                expected = await memory.store.rebase(
                    "t", cutoff, amount, 1, KEEP_S, only_if_unknown=only
                )
                got = await shared.store.rebase(
                    "t", cutoff, amount, 1, KEEP_S, only_if_unknown=only
                )
                assert got == expected
            assert await shared.store.spent("t") == await memory.store.spent("t")
            assert await shared.store.kept("t") == await memory.store.kept("t")
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


@pytest.fixture(params=REDIS_KINDS)
def any_redis_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(request.param)
    return url


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # the URL is a constant
)
@given(ops=_OPS)
def test_redis_and_in_process_agree_on_any_history(any_redis_url: str, ops: list[Op]) -> None:
    asyncio.run(_run_both(any_redis_url, ops))
