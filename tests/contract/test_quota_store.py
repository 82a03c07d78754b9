"""One contract for the learned-quota store: in process, on a single Redis and on a cluster."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from leasegate.core.ports.quota import Bucket, Quota, QuotaStore
from leasegate.kv.quota_memory import RETENTION_S, InProcessQuotaStore
from leasegate.kv.quota_redis import RedisQuotaStore
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

T0 = 1_750_000_000.25

REDIS_KINDS = [
    pytest.param("redis_url", id="redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster_url", id="redis-cluster", marks=pytest.mark.redis),
]


@pytest.fixture(params=["memory", *REDIS_KINDS])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[QuotaStore]:
    if request.param == "memory":
        yield InProcessQuotaStore()
        return
    client = connect(request.getfixturevalue(request.param))
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        yield RedisQuotaStore(client, prefix)
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


def _quota(account: str, model: str, observed_at: float, remaining: int) -> Quota:
    return Quota(
        account,
        model,
        {
            "requests": Bucket(500, remaining, observed_at + 0.12),
            "tokens": Bucket(None, 900, None),
            "output-tokens": Bucket(8_000, 7_000, observed_at + 2.5, 60.0),
        },
        "headers",
        observed_at,
    )


async def test_what_one_proxy_learned_every_other_reads_exactly(store: QuotaStore) -> None:
    a, b = _quota("acct-1", "m:1/x", T0, 499), _quota("acct-2", "m", T0 + 0.5, 0)
    await store.learn([a, b], T0 + 0.5)
    found = await store.snapshot([("acct-1", "m:1/x"), ("acct-2", "m"), ("acct-3", "m")], T0 + 1)
    assert found == {("acct-1", "m:1/x"): a, ("acct-2", "m"): b}


async def test_a_later_statement_replaces_the_earlier_whole(store: QuotaStore) -> None:
    await store.learn([_quota("acct", "m", T0, 10)], T0)
    later = Quota("acct", "m", {"requests": Bucket(None, 0, T0 + 3)}, "headers", T0 + 1)
    await store.learn([later], T0 + 1)
    assert await store.snapshot([("acct", "m")], T0 + 1) == {("acct", "m"): later}


async def test_a_quota_is_forgotten_after_its_retention(store: QuotaStore) -> None:
    await store.learn([_quota("acct", "m", T0, 10)], T0)
    gone = T0 + 2.5 + RETENTION_S + 1
    assert await store.snapshot([("acct", "m")], gone) == {}
