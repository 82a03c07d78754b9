"""The lease-rate meter over the real store (SQLite and Postgres): what the evidence rows of an
interval sent to each (account, served model), over its lease-seconds, smoothed; and the two
reads it makes, on both databases."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from leasegate.control_plane.lease_rates import LeaseRateMeter
from leasegate.core.ports.storage import PairSpend
from leasegate.db import Store
from leasegate.routing.lease_ceiling import LeaseRate
from tests.fixtures.control import StepClock, terminal_row
from tests.fixtures.storage import T0, minted

SERVED = "gpt-4o-2024-08-06"


async def commit_leases(
    store: Store, account_id: str, count: int, ttl: timedelta = timedelta(minutes=15)
) -> None:
    for _ in range(count):
        decision, key = minted(account_id=account_id, ttl=ttl)
        await store.commit_mint(decision, key, lease_capacity=None, now=T0)


async def counting(
    store: Store, leases: int, accounts: tuple[str, ...] = ("a",), **meter: Any
) -> tuple[StepClock, LeaseRateMeter]:
    """`leases` live on `a` at T0, and a meter (every 10 s) that has counted them."""
    clock = StepClock(T0)
    await commit_leases(store, "a", leases)
    started = LeaseRateMeter(store, list(accounts), clock, every_s=10.0, **meter)
    await started.run_once()
    return clock, started


async def spend(
    store: Store, account_id: str, seconds: list[float], tokens: int, lasting_s: float = 0.005
) -> None:
    """One request of `tokens` started at each of `seconds` after T0, each `lasting_s` long."""
    decision, _ = minted(account_id=account_id)
    rows = [
        replace(
            terminal_row(decision, f"req-{account_id}-{n}-{at}"),
            started_at=T0 + timedelta(seconds=at),
            duration_ms=lasting_s * 1000,
            upstream_status=200,
            outcome="success",
            input_tokens=tokens // 2,
            output_tokens=tokens - tokens // 2,
        )
        for n, at in enumerate(seconds)
    ]
    await store.write_evidence(rows)


async def test_the_two_reads_sum_the_window_and_count_live_leases_by_pair(store: Store) -> None:
    await commit_leases(store, "a", 2)
    await commit_leases(store, "b", 1)
    await spend(store, "a", [0.5, 1.0, 9.9, 10.0], tokens=1_000)  # the last one is past
    assert await store.spend_by_pair(T0, T0 + timedelta(seconds=10)) == [
        PairSpend("a", SERVED, 3, 1_500, 1_500)
    ]
    leases = await store.live_leases_by_pair(["a", "b", "c"], T0)
    assert leases == {("a", SERVED): 2, ("b", SERVED): 1}
    assert await store.live_leases_by_pair([], T0) == {}


async def test_a_request_is_counted_in_the_window_it_ended_in(store: Store) -> None:
    """A request still running when a window closes is counted in the next one, whatever
    window it started in; so reading window after window counts every request once."""
    await spend(store, "a", [8.0], tokens=1_000, lasting_s=4.0)  # ends at 12 s
    await spend(store, "a", [1.0], tokens=1_000, lasting_s=0.5)
    first = await store.spend_by_pair(T0, T0 + timedelta(seconds=10))
    second = await store.spend_by_pair(T0 + timedelta(seconds=10), T0 + timedelta(seconds=20))
    assert first == [PairSpend("a", SERVED, 1, 500, 500)]
    assert second == [PairSpend("a", SERVED, 1, 500, 500)]


async def test_the_meter_waits_for_rows_written_after_their_interval(store: Store) -> None:
    """An interval is read only once it ended `settle_s` ago: the rows of requests that ended
    in it but reached the database afterwards (a proxy writes in batches) are counted."""
    clock, meter = await counting(store, 2, settle_s=3.0, alpha=1.0)
    clock.advance(10)
    await meter.run_once()  # [0, 10) ended only now: not read yet
    assert meter.current() == {}
    await spend(store, "a", [float(n) for n in range(10)], tokens=1_000, lasting_s=0.9)
    clock.advance(10)
    await meter.run_once()  # [0, 10) settled; [10, 20) not yet
    # 10 requests over 20 lease-seconds, the last of them written after the interval ended
    assert meter.current() == {("a", SERVED): LeaseRate(0.5, 250.0, 250.0)}


async def test_the_meter_learns_what_one_lease_spends(store: Store) -> None:
    # the first count: nothing measured yet
    clock, meter = await counting(store, 2, accounts=("a", "b"), alpha=0.5)
    assert meter.current() == {}
    # two leases, 10 s: 20 lease-seconds; 10 requests of 1,000 tokens
    await spend(store, "a", [float(n) for n in range(10)], tokens=1_000)
    clock.advance(10)
    await meter.run_once()
    assert meter.current() == {("a", SERVED): LeaseRate(0.5, 250.0, 250.0)}
    clock.advance(10)  # an idle interval: the average halves toward zero
    await meter.run_once()
    assert meter.current() == {("a", SERVED): LeaseRate(0.25, 125.0, 125.0)}


async def test_leases_gained_within_an_interval_do_not_dilute_its_spend(store: Store) -> None:
    """A lease minted within an interval rarely has a request ended in it: while the pair
    gains leases its spend is spread over the leases live at the interval's start only; while
    it loses them, over the mean of the two counts."""
    clock, meter = await counting(store, 2, alpha=1.0)
    await commit_leases(store, "a", 4)  # 2 -> 6 within the interval
    await spend(store, "a", [float(n) for n in range(10)], tokens=1_000)
    clock.advance(10)
    await meter.run_once()
    # 10 requests over 2 leases x 10 s, not over the mean's 4 x 10 s
    assert meter.current() == {("a", SERVED): LeaseRate(0.5, 250.0, 250.0)}


async def test_leases_lost_within_an_interval_spread_its_spend_over_the_mean(
    store: Store,
) -> None:
    await commit_leases(store, "a", 4, ttl=timedelta(seconds=5))  # gone before it ends
    clock, meter = await counting(store, 2, alpha=1.0)  # 6 at the start, 2 at the end
    await spend(store, "a", [n / 2 for n in range(20)], tokens=1_000)
    clock.advance(10)
    await meter.run_once()
    # 20 requests over the mean's 4 leases x 10 s, not over the 2 left at the end
    assert meter.current() == {("a", SERVED): LeaseRate(0.5, 250.0, 250.0)}


async def test_the_time_leases_waited_on_quota_refusals_is_not_time_they_sent_in(
    store: Store,
) -> None:
    clock, meter = await counting(store, 2, alpha=1.0)
    await spend(store, "a", [float(n) for n in range(5)], tokens=1_000)
    decision, _ = minted(account_id="a")
    refused = [
        replace(
            terminal_row(decision, f"req-refused-{n}"),
            started_at=T0 + timedelta(seconds=n + 0.5),
            upstream_status=None,
            outcome="refused",
            refusal_reason="account-quota-exhausted",
            retry_after_ms=2_000.0,
        )
        for n in range(5)
    ]
    other = replace(refused[0], request_id="req-cooling", refusal_reason="model-cooling")
    await store.write_evidence([*refused, other])  # only the quota's waits count
    assert await store.spend_by_pair(T0, T0 + timedelta(seconds=10)) == [
        PairSpend("a", SERVED, 5, 2_500, 2_500, waited_s=10.0)
    ]
    clock.advance(10)
    await meter.run_once()
    # 5 sent over 20 lease-seconds of which 10 were spent waiting: 0.5 a second free to send
    assert meter.current() == {("a", SERVED): LeaseRate(0.5, 250.0, 250.0)}


async def test_a_pairs_average_leaves_the_prior_as_its_own_lease_seconds_outweigh_it(
    store: Store,
) -> None:
    """The prior is worth one lease over one interval (10 lease-seconds here). A first sample
    over 20 lease-seconds takes two thirds of the average, not the whole (leases just minted
    send little) nor only `alpha` (the average would linger near the prior for intervals);
    the next sample of 20 would take 20/50 < alpha, so it takes alpha."""
    prior = LeaseRate(1.0, 1_000.0, 256.0)
    clock, meter = await counting(store, 2, alpha=0.5, prior=prior)
    await spend(store, "a", [1.0, 2.0], tokens=1_000)  # 2 requests over 20 lease-seconds
    clock.advance(10)
    await meter.run_once()
    first = meter.current()[("a", SERVED)]
    assert first.requests_per_s == pytest.approx(1 / 3 * 1.0 + 2 / 3 * 0.1)
    assert first.tokens_per_s == pytest.approx(1 / 3 * 1_256 + 2 / 3 * 100)
    await spend(store, "a", [11.0, 12.0, 13.0, 14.0], tokens=1_000)  # 0.2 a lease-second
    clock.advance(10)
    await meter.run_once()
    second = meter.current()[("a", SERVED)]
    assert second.requests_per_s == pytest.approx(0.5 * 0.2 + 0.5 * first.requests_per_s)
