"""The pure cooldown machine and selection's aggregation of it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.ports.health import Cooldown, HealthSnapshot
from leasegate.routing.health import (
    HEALTHY,
    HealthState,
    account_health,
    admit,
    cooldown_s,
    health_block,
    on_failure,
    on_success,
)

seconds = st.floats(min_value=0.001, max_value=1e6, allow_nan=False)
retry_afters = st.none() | st.floats(min_value=0, max_value=1e7, allow_nan=False)
jitters = st.floats(min_value=0, max_value=0.999, allow_nan=False)


@given(base=seconds, cap=seconds, retry_after=retry_afters, jitter=jitters)
def test_a_window_stays_between_the_floor_and_the_ceiling(
    base: float, cap: float, retry_after: float | None, jitter: float
) -> None:
    value = cooldown_s(base, cap, retry_after, jitter)
    assert min(base * (1 - jitter), cap) <= value <= cap
    if retry_after is None:
        assert value <= base  # the recovery bound: no window without a hint exceeds base


def test_the_window_is_base_less_its_jitter_and_retry_after_wins_below_the_cap() -> None:
    assert cooldown_s(30, 600, None, 0.0) == 30
    assert cooldown_s(30, 600, None, 0.2) == 24
    assert cooldown_s(30, 600, 90, 0.2) == 90
    assert cooldown_s(30, 600, 3600, 0.0) == 600
    assert cooldown_s(30, 600, 5, 0.0) == 30


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
            cooldown_s=cooldown_s(30, 600, event.amount, 0.0),
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


def test_a_success_after_expiry_resets_the_trips() -> None:
    state = HealthState(trips=3, until=1_000.0, reason="http-429")
    state, _ = on_success(state, 1_000.0)
    tripped, change = on_failure(state, 2_000.0, threshold=1, cooldown_s=30, reason="x")
    assert change == "tripped"
    assert (tripped.trips, tripped.until) == (1, 2_030.0)


def test_a_success_during_a_cooldown_leaves_it_and_its_trips_in_place() -> None:
    cooling = HealthState(trips=2, until=1_000.0, reason="http-429")
    assert on_success(cooling, 999.0) == (cooling, None)
    # the next failure after expiry is still half-open: it trips again at once
    tripped, change = on_failure(cooling, 1_000.0, threshold=5, cooldown_s=30, reason="x")
    assert (change, tripped.trips, tripped.until) == ("tripped", 3, 1_030.0)
    assert on_success(cooling, 1_000.0) == (HEALTHY, "recovered")


def test_half_open_admits_one_trial_whose_outcome_decides() -> None:
    half_open = HealthState(trips=2, until=1_000.0, reason="http-503")
    assert admit(half_open, 999.0, 30) == (half_open, "blocked")
    trial, verdict = admit(half_open, 1_000.0, 30)
    assert (verdict, trial.until, trial.trial, trial.trips) == ("trial", 1_030.0, True, 2)
    assert admit(trial, 1_010.0, 30) == (trial, "blocked")  # one trial per window
    # only the trial's own outcome ends the window early
    assert on_success(trial, 1_010.0) == (replace(trial, streak=0), None)
    assert on_failure(trial, 1_010.0, threshold=1, cooldown_s=30, reason="x") == (trial, None)
    assert on_success(trial, 1_010.0, trial=True) == (HEALTHY, "recovered")
    failed, change = on_failure(trial, 1_010.0, threshold=5, cooldown_s=24, reason="http-502")
    assert (failed, change) == (trial, None)
    failed, change = on_failure(
        trial, 1_010.0, threshold=5, cooldown_s=24, reason="http-502", trial=True
    )
    assert change == "tripped"
    assert (failed.trips, failed.until, failed.trial) == (3, 1_034.0, False)
    assert failed.reason == "http-502"
    # a trial that never reports frees the slot when its window ends
    assert admit(trial, 1_030.0, 30)[1] == "trial"
    assert admit(HEALTHY, 0.0, 30) == (HEALTHY, "pass")


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


BASE, CAP = 30.0, 600.0

steps = st.lists(
    st.one_of(
        st.tuples(st.just("wait"), st.floats(0, 100, allow_nan=False)),
        st.tuples(st.sampled_from(["admit", "trial-ok", "trial-fail", "fail", "succeed"]),
                  st.just(0.0)),
    ),
    max_size=80,
)  # fmt: skip


@given(script=steps, threshold=st.integers(1, 4), jitter=st.floats(0, 0.5))
def test_at_most_one_trial_per_window_whatever_happens(
    script: list[tuple[str, float]], threshold: int, jitter: float
) -> None:
    """However requests, outcomes and time interleave, two trials are at least one window
    apart: a pair that keeps failing costs one request per window."""
    window = cooldown_s(BASE, CAP, None, jitter)
    state, now, pending, trials = HEALTHY, 1_000.0, False, []
    for kind, amount in script:
        if kind == "wait":
            now += amount
        elif kind == "admit":
            state, verdict = admit(state, now, window)
            if verdict == "trial":
                trials.append(now)
                pending = True
        elif kind in ("trial-ok", "trial-fail") and pending:
            pending = False
            if kind == "trial-ok":
                state, _ = on_success(state, now, trial=True)
            else:
                state, _ = on_failure(
                    state, now, threshold=threshold, cooldown_s=window, reason="x", trial=True
                )
        elif kind == "fail":
            state, _ = on_failure(state, now, threshold=threshold, cooldown_s=window, reason="x")
        elif kind == "succeed":
            state, _ = on_success(state, now)
    assert all(b - a >= window for a, b in itertools.pairwise(trials))


@given(
    failures=st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=30),
    recovery_after=st.floats(0, 200, allow_nan=False),
    every=st.floats(0.1, 10),
    threshold=st.integers(1, 4),
    jitter=st.floats(0, 0.5),
)
def test_a_recovered_upstream_carries_traffic_within_one_base_window(
    failures: list[float], recovery_after: float, every: float, threshold: int, jitter: float
) -> None:
    """Any history of failures up to the recovery R; from R on, a request every `every`
    seconds, each of which succeeds if it is let through: one gets through by R + base +
    `every` (no upstream hint stretched a window)."""
    window = cooldown_s(BASE, CAP, None, jitter)
    state, now = HEALTHY, 0.0
    for gap in failures:
        now += gap
        state, verdict = admit(state, now, window)
        if verdict != "blocked":
            state, _ = on_failure(
                state, now, threshold=threshold, cooldown_s=window, reason="x",
                trial=verdict == "trial",
            )  # fmt: skip
    recovered = now + recovery_after
    now = recovered
    while True:
        state, verdict = admit(state, now, window)
        if verdict != "blocked":
            break
        now += every
    assert now <= recovered + BASE + every
    state, _change = on_success(state, now, trial=verdict == "trial")
    assert state == HEALTHY
