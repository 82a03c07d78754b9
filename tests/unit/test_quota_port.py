"""The quota port's arithmetic: what a bucket holds now, and when a request will fit."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.ports.quota import Bucket, Quota
from leasegate.kv.quota_memory import InProcessQuotaStore


def _quota(buckets: dict[str, Bucket], observed_at: float = 100.0) -> Quota:
    return Quota("a", "m", buckets, "headers", observed_at)  # type: ignore[arg-type]


def test_an_empty_request_bucket_refills_linearly_to_its_reset() -> None:
    quota = _quota({"requests": Bucket(limit=60, remaining=0, reset_at=160.0)})
    assert quota.room_at(1, 0, 100.0) == 101.0  # one request a second
    assert quota.room_at(1, 0, 101.0) is None
    assert quota.remaining_at("requests", 130.0) == 30.0
    assert quota.remaining_at("requests", 170.0) == 60.0


def test_a_hold_without_a_limit_lasts_exactly_until_the_reset() -> None:
    quota = _quota({"requests": Bucket(limit=None, remaining=0, reset_at=101.3)})
    assert quota.room_at(1, 0, 100.0) == 101.3
    assert quota.room_at(1, 0, 101.2) == 101.3
    assert quota.room_at(1, 0, 101.3) is None


def test_tokens_below_the_estimate_refuse_until_enough_refilled() -> None:
    quota = _quota({"tokens": Bucket(limit=10_000, remaining=1_000, reset_at=190.0)})
    assert quota.room_at(1, 500, 100.0) is None
    assert quota.room_at(1, 5_500, 100.0) == 145.0  # 100 tokens a second
    assert quota.room_at(1, 50_000, 100.0) == 190.0  # more than it holds: when it is full


def test_a_declared_bucket_refills_over_its_window() -> None:
    quota = _quota({"tokens": Bucket(limit=6_000, remaining=0, reset_at=None, window_s=60.0)})
    assert quota.room_at(1, 200, 100.0) == 102.0
    assert quota.remaining_at("tokens", 200.0) == 6_000


def test_an_untimed_remaining_is_trusted_one_second_then_unknown() -> None:
    quota = _quota({"requests": Bucket(limit=None, remaining=0, reset_at=None)})
    assert quota.room_at(1, 0, 100.5) == 101.0
    assert quota.room_at(1, 0, 101.5) is None


def test_nothing_known_admits() -> None:
    assert _quota({}).room_at(1, 10**9, 100.0) is None
    unknown = _quota({"tokens": Bucket(limit=None, remaining=None, reset_at=None)})
    assert unknown.room_at(1, 10**9, 100.0) is None


@given(
    limit=st.integers(1, 10**7),
    spent=st.integers(0, 10**7),
    span=st.floats(0.01, 3600),
    need=st.integers(1, 10**7),
    later=st.floats(0, 7200),
)
def test_room_is_monotonic_and_its_time_is_honoured(
    limit: int, spent: int, span: float, need: int, later: float
) -> None:
    remaining = max(0, limit - spent)
    quota = _quota({"tokens": Bucket(limit, remaining, 100.0 + span)})
    held = [quota.remaining_at("tokens", 100.0 + t) or 0.0 for t in (0.0, later, later * 2)]
    assert all(0 <= h <= limit for h in held)
    assert held == sorted(held)  # buckets only fill while nobody spends
    when = quota.room_at(1, need, 100.0)
    if when is not None:
        assert 100.0 <= when <= 100.0 + span + 1e-6
        assert quota.room_at(1, need, when + 1e-6) is None


def test_the_memory_store_keeps_the_newest_of_a_pair() -> None:
    async def run() -> None:
        store = InProcessQuotaStore()
        newer = _quota({"requests": Bucket(10, 1, 130.0)}, observed_at=120.0)
        older = _quota({"requests": Bucket(10, 9, 110.0)}, observed_at=100.0)
        await store.learn([newer], 120.0)
        await store.learn([older], 121.0)
        assert (await store.snapshot([("a", "m"), ("b", "m")], 121.0)) == {("a", "m"): newer}
        assert await store.snapshot([("a", "m")], 130.0 + 121.0) == {}

    asyncio.run(run())
