"""The pure cooldown machine and selection's aggregation of it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.ports.health import Cooldown, HealthSnapshot
from leasegate.routing.health import (
    HEALTHY,
    HealthState,
    account_health,
    cooldown_s,
    health_block,
    on_failure,
    on_success,
)

seconds = st.floats(min_value=0.001, max_value=1e6, allow_nan=False)
retry_afters = st.none() | st.floats(min_value=0, max_value=1e7, allow_nan=False)


@given(trips=st.integers(1, 5000), base=seconds, cap=seconds, retry_after=retry_afters)
def test_cooldown_stays_between_the_floor_and_the_ceiling(
    trips: int, base: float, cap: float, retry_after: float | None
) -> None:
    value = cooldown_s(trips, base, cap, retry_after)
    assert min(base, cap) <= value <= cap


@given(trips=st.integers(1, 5000), base=seconds, cap=seconds, retry_after=retry_afters)
def test_cooldown_never_shrinks_with_more_trips(
    trips: int, base: float, cap: float, retry_after: float | None
) -> None:
    assert cooldown_s(trips, base, cap, retry_after) <= cooldown_s(
        trips + 1, base, cap, retry_after
    )


def test_cooldown_doubles_per_trip_up_to_the_cap_and_retry_after_wins_below_it() -> None:
    assert [cooldown_s(t, 30, 600, None) for t in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]
    assert cooldown_s(1, 30, 600, 90) == 90
    assert cooldown_s(3, 30, 600, 90) == 120
    assert cooldown_s(1, 30, 600, 3600) == 600


@dataclass(frozen=True)
class Event:
    kind: str  # "fail" | "succeed" | "wait"
    amount: float | None = None
    """Seconds to wait, or a failure's Retry-After."""


events = st.lists(
    st.one_of(
        st.builds(Event, st.just("fail"), st.none() | st.floats(0, 2000, allow_nan=False)),
        st.builds(Event, st.just("succeed")),
        st.builds(Event, st.just("wait"), st.floats(0, 2000, allow_nan=False)),
    ),
    max_size=60,
)


@given(script=events, threshold=st.integers(1, 6))
def test_the_machine_under_any_sequence_of_events(script: list[Event], threshold: int) -> None:
    state, now, failures_since_reset = HEALTHY, 1_000.0, 0
    for event in script:
        if event.kind == "wait":
            now += event.amount or 0.0
            continue
        before = state
        if event.kind == "succeed":
            state, change = on_success(state, now)
            failures_since_reset = 0
            if before.active(now):
                # a request admitted before the trip: the cooldown and its trips stay
                assert (state, change) == (replace(before, streak=0), None)
                continue
            # after expiry a success resets, and reports a recovery exactly when it had tripped
            assert state == HEALTHY
            assert (change == "recovered") == (before.trips > 0)
            continue
        state, change = on_failure(
            state,
            now,
            threshold=threshold,
            base_s=30,
            max_s=600,
            retry_after_s=event.amount,
            reason="http-503",
        )
        if before.active(now):
            assert (state, change) == (before, None), "an active cooldown is never extended"
            continue
        failures_since_reset += 1
        if before.trips > 0:
            assert change == "tripped", "half-open: the first failure after expiry re-trips"
        else:
            # the streak property: the threshold-th consecutive failure trips, not before
            assert (change == "tripped") == (failures_since_reset == threshold)
        if change == "tripped":
            assert state.trips == before.trips + 1
            assert state.streak == 0
            assert now + 30 <= state.until <= now + 600
            assert state.reason == "http-503"
        else:
            assert state.streak == before.streak + 1 == failures_since_reset
        assert 0 <= state.streak < threshold


def test_a_success_after_expiry_restarts_the_backoff() -> None:
    state = HealthState(trips=3, until=1_000.0, reason="http-429")
    state, _ = on_success(state, 1_000.0)
    tripped, change = on_failure(
        state, 2_000.0, threshold=1, base_s=30, max_s=600, retry_after_s=None, reason="x"
    )
    assert change == "tripped"
    assert (tripped.trips, tripped.until) == (1, 2_030.0)


def test_a_success_during_a_cooldown_leaves_it_and_its_trips_in_place() -> None:
    cooling = HealthState(trips=2, until=1_000.0, reason="http-429")
    assert on_success(cooling, 999.0) == (cooling, None)
    # the next failure after expiry is still half-open: the next backoff step at once
    tripped, change = on_failure(
        cooling, 1_000.0, threshold=5, base_s=30, max_s=600, retry_after_s=None, reason="x"
    )
    assert (change, tripped.trips, tripped.until) == ("tripped", 3, 1_120.0)
    assert on_success(cooling, 1_000.0) == (HEALTHY, "recovered")


def _cooldown(account: str, model: str | None, until: float) -> Cooldown:
    return Cooldown(account, model, until, "http-429", 1)


def test_the_circuit_is_checked_before_the_model() -> None:
    snapshot = HealthSnapshot(
        circuits={"a": _cooldown("a", None, 50.0)},
        cooling={("a", "m"): _cooldown("a", "m", 40.0), ("b", "m"): _cooldown("b", "m", 30.0)},
    )
    assert health_block(snapshot, "a", "m") == ("circuit-open", snapshot.circuits["a"])
    assert health_block(snapshot, "b", "m") == ("model-cooling", snapshot.cooling[("b", "m")])
    assert health_block(snapshot, "b", "other") is None
    assert health_block(snapshot, "c", "m") is None
    assert account_health(snapshot, "a") == "circuit-open"
    assert account_health(snapshot, "b") == "cooling"
    assert account_health(snapshot, "c") == "healthy"
