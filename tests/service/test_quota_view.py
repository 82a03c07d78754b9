"""Two proxies' quota views over one shared store (the in-process twin), on a clock the test
moves: what one learns reaches the other by the batched write and the periodic read, a newer
statement wins, and nothing on the request path touches the store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasegate.accounts import parse_accounts
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.kv.quota_memory import InProcessQuotaStore
from leasegate.providers import Usage
from leasegate.proxy.quota_view import PROBE_DOUBLING_S, PROBE_RETRY_S, SILENT_EVERY_S, QuotaView
from leasegate.routing.quota import Estimate
from tests.fixtures.control import StepClock
from tests.fixtures.quota import REGISTRY

COST = Estimate(10, 10)


class CountingStore(InProcessQuotaStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def learn(self, quotas: Sequence[Quota], now: float) -> None:
        self.calls += 1
        await super().learn(quotas, now)

    async def snapshot(
        self, pairs: Sequence[tuple[str, str]], now: float
    ) -> Mapping[tuple[str, str], Quota]:
        self.calls += 1
        return await super().snapshot(pairs, now)


def _views(probe_requests: int = 0) -> tuple[StepClock, CountingStore, QuotaView, QuotaView]:
    clock, store = StepClock(), CountingStore()
    return (
        clock,
        store,
        QuotaView(store, REGISTRY, clock, probe_requests=probe_requests),
        QuotaView(store, REGISTRY, clock, probe_requests=probe_requests),
    )


async def test_a_rate_limit_heard_by_one_proxy_holds_the_pair_on_the_other() -> None:
    clock, _store, one, other = _views()
    now = clock.now().timestamp()
    until = one.rate_limited("a", "m", {}, 2.0, now)
    assert 2.0 <= until - now <= 2.2
    assert one.admit("a", "m", COST, now) == until
    assert other.admit("a", "m", COST, now) is None  # not heard yet: nothing is known
    await one.flush()
    await other.refresh()
    assert other.admit("a", "m", COST, now + 1.0) == until
    assert other.admit("a", "m", COST, until) is None  # exactly until the hold ends


async def test_the_request_path_never_touches_the_store() -> None:
    clock, store, one, _ = _views()
    now = clock.now().timestamp()
    headers: dict[QuotaDimension, Bucket] = {
        "requests": Bucket(100, 50, now + 60),
        "tokens": Bucket(10_000, 5_000, now + 60),
    }
    one.answered("a", "m", headers, None, Usage(), now)
    for _ in range(20):
        assert one.admit("a", "m", COST, now) is None
        one.answered("a", "m", headers, COST, Usage(10, 10), now)
    one.rate_limited("a", "m", {}, 1.0, now)
    assert store.calls == 0
    await one.flush()
    assert store.calls == 1  # one batch for everything learned since the last flush


async def test_a_newer_statement_wins_and_a_proxys_own_write_does_not_undo_its_spending() -> None:
    clock, _store, one, other = _views()
    now = clock.now().timestamp()
    one.answered("a", "m", {"requests": Bucket(10, 5, now + 600)}, None, Usage(), now)
    await one.flush()
    for _ in range(5):
        assert one.admit("a", "m", Estimate(0, 0), now) is None
    assert one.admit("a", "m", Estimate(0, 0), now) is not None  # spent locally
    await one.refresh()  # its own statement comes back: not newer, the spending stays
    assert one.admit("a", "m", Estimate(0, 0), now) is not None
    clock.advance(1)
    other.answered("a", "m", {"requests": Bucket(10, 9, now + 601)}, None, Usage(), now + 1)
    await other.flush()
    await one.refresh()
    assert one.admit("a", "m", Estimate(0, 0), now + 1) is None  # the provider said 9 left


async def test_declared_limits_count_locally_and_an_unsent_request_is_given_back() -> None:
    clock, _, one, _ = _views()
    now = clock.now().timestamp()
    assert one.output_estimate("a", "local") == 7
    assert one.admit("a", "local", COST, now) is None
    refused_at = one.admit("a", "local", COST, now)
    assert refused_at == now + 60.0  # rpm 1
    one.unsent("a", "local", COST, now)
    assert one.admit("a", "local", COST, now) is None


def _requests(limit: int, remaining: int, now: float) -> dict[QuotaDimension, Bucket]:
    return {"requests": Bucket(limit, remaining, now + 600)}


async def test_an_answer_never_gives_back_room_that_requests_still_in_flight_hold() -> None:
    clock, _, one, _ = _views()
    now = clock.now().timestamp()
    one.answered("a", "m", _requests(10, 3, now), None, Usage(), now)
    free = Estimate(0, 0)
    for ref in ("r1", "r2", "r3"):
        assert one.admit("a", "m", free, now, ref) is None
    assert one.admit("a", "m", free, now, "r4") is not None
    assert one.in_flight("a", "m") == 3
    # r1's answer: the provider counted r1 only (r2 and r3 reached it later)
    one.answered("a", "m", _requests(10, 2, now), free, Usage(), now + 0.1, "r1")
    assert one.admit("a", "m", free, now + 0.1, "r5") is not None  # r2 and r3 hold the 2
    one.answered("a", "m", _requests(10, 0, now), free, Usage(), now + 0.2, "r3")
    one.answered("a", "m", _requests(10, 1, now), free, Usage(), now + 0.3, "r2")  # older
    assert one.admit("a", "m", free, now + 0.3, "r6") is not None  # r3's 0 is the newest
    assert one.in_flight("a", "m") == 0


async def test_a_refused_or_rate_limited_request_leaves_flight_and_an_unsent_one_gives_back() -> (
    None
):
    clock, _, one, _ = _views()
    now = clock.now().timestamp()
    one.answered("a", "m", _requests(10, 2, now), None, Usage(), now)
    assert one.admit("a", "m", COST, now, "r1") is None
    assert one.admit("a", "m", COST, now, "r2") is None
    one.unsent("a", "m", COST, now, "r1")
    one.rate_limited("a", "m", {}, 0.0, now, "r2")
    assert one.in_flight("a", "m") == 0
    # with nothing in flight, the next statement is taken as it is
    one.answered("a", "m", _requests(10, 1, now), None, Usage(), now + 1)
    assert one.admit("a", "m", COST, now + 1, "r3") is None


async def test_a_statement_from_the_store_counts_this_proxys_later_requests() -> None:
    clock, _, one, other = _views()
    now = clock.now().timestamp()
    other.answered("a", "m", _requests(10, 2, now), None, Usage(), now)
    await other.flush()
    one.answered("a", "m", _requests(10, 2, now - 1), None, Usage(), now - 1)
    assert one.admit("a", "m", Estimate(0, 0), now + 0.5, "r1") is None  # after the statement
    await one.refresh()
    assert one.admit("a", "m", Estimate(0, 0), now + 0.5, "r2") is None
    assert one.admit("a", "m", Estimate(0, 0), now + 0.5, "r3") is not None  # 2 - r1 - r2


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=60))
def test_the_view_never_admits_more_than_the_bucket_holds_whatever_order_answers_arrive(
    steps: list[tuple[bool, int]],
) -> None:
    """An upstream bucket of 8 requests with no refill counts each request as it arrives (in
    the order sent) and states what remained then; the answers come back in any order. The
    view admits exactly what the bucket still holds: never one more (an upstream 429), never
    one fewer once every answer is in."""
    view = QuotaView(InProcessQuotaStore(), REGISTRY, StepClock())
    now = 1_000.0
    view.answered("a", "m", _requests(8, 8, now), None, Usage(), now)
    free, upstream, stated = Estimate(0, 0), 8, {}
    flying: list[str] = []
    for n, (send, pick) in enumerate(steps):
        if send or not flying:
            ref = f"r{n}"
            if view.admit("a", "m", free, now, ref) is None:
                assert upstream > 0, "admitted what the provider would refuse"
                upstream -= 1
                stated[ref] = upstream
                flying.append(ref)
            else:
                assert upstream == 0, "refused what the provider would take"
        else:
            ref = flying.pop(pick % len(flying))
            view.answered("a", "m", _requests(8, stated[ref], now), free, Usage(), now, ref)
    for ref in flying:
        view.answered("a", "m", _requests(8, stated[ref], now), free, Usage(), now, ref)
    assert (view.admit("a", "m", free, now) is None) == (upstream > 0)


async def test_a_pair_answering_without_headers_is_told_to_the_store_once_a_minute() -> None:
    """So the mints stop probing it; the views hold nothing for it and ask nothing."""
    clock, store, one, other = _views()
    now = clock.now().timestamp()
    one.answered("a", "m", {}, COST, Usage(), now)
    await one.flush()
    stated = (await store.snapshot([("a", "m")], now))[("a", "m")]
    assert (stated.buckets, stated.observed_at) == ({}, now)
    one.answered("a", "m", {}, COST, Usage(), now + 1)
    assert store.calls == 2  # learn + the snapshot above: nothing new to write
    await one.flush()
    assert store.calls == 2
    await other.refresh()
    assert not other.watches("a", "m")
    calls = store.calls
    clock.advance(SILENT_EVERY_S - 1)  # still within the minute: nothing to write
    one.answered("a", "m", {}, COST, Usage(), clock.now().timestamp())
    await one.flush()
    assert store.calls == calls
    clock.advance(1)  # a minute since the last statement: told again
    later = clock.now().timestamp()
    one.answered("a", "m", {}, COST, Usage(), later)
    await one.flush()
    assert store.calls == calls + 1
    stated = (await store.snapshot([("a", "m")], later))[("a", "m")]
    assert (stated.buckets, stated.observed_at) == ({}, later)


async def test_an_idle_view_leaves_the_store_alone_and_refreshes_as_soon_as_requests_return() -> (
    None
):
    """Idle, the view's loop makes no store call (no flush timer, a refresh every 10 s);
    the first request after it brings a refresh at once, and the statements it learns are
    written one flush interval later."""
    clock, store = StepClock(), CountingStore()
    view = QuotaView(store, REGISTRY, clock, flush_s=0.02, refresh_s=0.3)
    await view.start()  # one refresh
    try:
        await asyncio.sleep(1.0)  # three refresh intervals, idle
        assert store.calls == 1
        now = clock.now().timestamp()
        assert view.admit("a", "m", COST, now, ref="r") is None
        await asyncio.sleep(0.1)
        assert store.calls == 2  # the refresh, at once (not after refresh_s)
        headers: dict[QuotaDimension, Bucket] = {"requests": Bucket(100, 50, now + 60)}
        view.answered("a", "m", headers, COST, Usage(), now, ref="r")
        await asyncio.sleep(1.2)
        # the write, and a refresh every 0.3 s until one finds no request since the last
        assert store.calls >= 4
        calls = store.calls
        await asyncio.sleep(0.8)
        assert store.calls == calls  # idle again: nothing
    finally:
        await view.stop()


async def test_a_pair_nothing_is_known_of_takes_one_request_until_its_first_answer() -> None:
    """The probe: a second request while the first is unanswered is refused (a short wait),
    the first answer's headers end it as they arrive, and what they state is admitted on."""
    clock, _store, one, _ = _views(probe_requests=1)
    now = clock.now().timestamp()
    assert one.watches("a", "m")
    assert one.probing("a", "m")
    assert one.admit("a", "m", COST, now, ref="first") is None
    assert one.admit("a", "m", COST, now, ref="second") == now + PROBE_RETRY_S
    one.replied("a", "m", _requests(10, 1, now), 200, now + 0.3, "first")
    assert not one.probing("a", "m")
    assert one.admit("a", "m", COST, now + 0.3, ref="second") is None  # the one left
    assert one.admit("a", "m", COST, now + 0.3, ref="third") is not None  # stated: none left
    # the first request's end takes the same headers again: nothing given back twice
    one.answered("a", "m", _requests(10, 1, now), COST, Usage(), now + 0.4, "first")
    assert one.admit("a", "m", COST, now + 0.4, ref="third") is not None


async def test_a_probe_without_an_answer_or_with_a_server_error_keeps_the_pair_probed() -> None:
    clock, _store, one, _ = _views(probe_requests=1)
    now = clock.now().timestamp()
    assert one.admit("a", "m", COST, now, ref="lost") is None
    one.unanswered("a", "m", "lost")  # the send failed: nothing heard
    assert one.probing("a", "m")
    assert one.admit("a", "m", COST, now, ref="failing") is None
    one.replied("a", "m", {}, 503, now, "failing")
    one.answered("a", "m", {}, COST, Usage(), now, "failing", status=503)
    assert one.probing("a", "m")
    assert one.admit("a", "m", COST, now, ref="next") is None
    assert one.admit("a", "m", COST, now, ref="behind it") is not None


async def test_a_pair_answering_without_headers_is_no_longer_probed_here_or_elsewhere() -> None:
    clock, _store, one, other = _views(probe_requests=1)
    now = clock.now().timestamp()
    assert one.admit("a", "m", COST, now, ref="r") is None
    one.replied("a", "m", {}, 200, now, "r")
    assert not one.probing("a", "m")
    assert all(one.admit("a", "m", COST, now, ref=f"r{n}") is None for n in range(5))
    one.answered("a", "m", {}, COST, Usage(), now, "r")
    await one.flush()
    assert other.probing("a", "m")
    await other.refresh()  # the empty statement: it has answered a proxy
    assert not other.probing("a", "m")
    assert not other.watches("a", "m")


async def test_declared_limits_are_never_probed_and_a_zero_probe_bounds_nothing() -> None:
    clock, store = StepClock(), CountingStore()
    unbounded = QuotaView(store, REGISTRY, clock, probe_requests=0)
    now = clock.now().timestamp()
    assert not unbounded.watches("a", "m")
    assert all(unbounded.admit("a", "m", COST, now, ref=f"r{n}") is None for n in range(5))
    bounded = QuotaView(store, REGISTRY, clock)
    assert not bounded.probing("a", "local")
    assert bounded.watches("a", "local")


async def test_a_kind_whose_answers_never_state_a_quota_is_never_probed() -> None:
    """Its first answer would say nothing: concurrent first requests all go."""
    plain = parse_accounts(
        {
            "accounts": [
                {
                    "id": "p",
                    "provider": "gemini",
                    "base_url": "https://generativelanguage.googleapis.com",
                    "credential_env": "LEASEGATE_CRED_P",
                    "models": {"m": "m"},
                }
            ]
        },
        {"LEASEGATE_CRED_P"},
    )
    clock = StepClock()
    view = QuotaView(CountingStore(), plain, clock)
    now = clock.now().timestamp()
    assert not view.probing("p", "m")
    assert not view.watches("p", "m")
    assert all(view.admit("p", "m", COST, now, ref=f"r{n}") is None for n in range(5))


async def test_a_probe_whose_answer_is_slow_lets_twice_as_many_through_every_second() -> None:
    """A long completion not streamed sends its headers at its end: the pair's other requests
    are held back for a few doublings, not for as long as it takes; each refusal names a short
    wait, or the next doubling when that is sooner."""
    clock, _store, one, _ = _views(probe_requests=1)
    first = clock.now().timestamp()
    step = PROBE_DOUBLING_S
    admitted = []
    for tick in range(4):
        at = first + tick * step
        sent = [n for n in range(8) if one.admit("a", "m", COST, at, ref=f"{tick}-{n}") is None]
        admitted.append(len(sent))
        assert one.admit("a", "m", COST, at, ref=f"{tick}-late") == at + PROBE_RETRY_S
        late = at + step - PROBE_RETRY_S / 2  # the next doubling comes sooner than the wait
        next_doubling = first + (tick + 1) * step
        assert one.admit("a", "m", COST, late, ref=f"{tick}-later") == pytest.approx(next_doubling)
    assert admitted == [1, 1, 2, 4]  # in flight: 1, 2, 4, 8
    one.replied("a", "m", {}, 200, first + 4 * step, "0-0")
    assert one.admit("a", "m", COST, first + 4 * step, ref="after") is None
