"""The health machine where issue 21 changed it: a rate limit is no fault (it never moves a
streak, a trip or a circuit, whatever the history around it), and an overload cools for the
short overload window, not the base one."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.observation import Classification, Observation
from leasegate.core.ports.health import HealthPolicy
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.routing.classify import classify
from leasegate.routing.health import drawn_cooldown_s

POLICY = HealthPolicy(failure_threshold=2, account_failure_threshold=2, base_cooldown_s=30.0)

SUCCESS = classify(Observation("response", 200))
FAULT = classify(Observation("response", 503))
ACCOUNT = classify(Observation("response", 401, "authentication_error", None))
RATE_LIMIT = classify(Observation("response", 429, "requests", "rate_limit_exceeded"))
HEADERS_RATE_LIMIT = classify(Observation("response", 429, rate_limit_wait_s=0.6))
OVERLOAD = classify(Observation("response", 529, "overloaded_error", None))

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["success", "fault", "account", "rate-limit"]),
        st.floats(0.0, 40.0),  # seconds since the previous event
    ),
    max_size=30,
)
_BY_NAME = {"success": SUCCESS, "fault": FAULT, "account": ACCOUNT}


def _replay(history: list[tuple[Classification, float]]) -> list[object]:
    async def run() -> list[object]:
        store = InProcessHealthStore(POLICY)
        now = 1_000.0
        seen: list[object] = []
        for classification, gap in history:
            now += gap
            await store.record("a", "m", classification, 0.6, now)
            seen.append((store.state_of("a", "m", now), store.state_of("a", None, now)))
        return seen

    return asyncio.run(run())


@given(EVENTS)
def test_rate_limits_never_move_the_machine(events: list[tuple[str, float]]) -> None:
    """Any history of successes, faults and account failures reaches the same states at
    every step whether its rate limits are recorded or not recorded at all."""
    recorded = [
        (RATE_LIMIT if name == "rate-limit" else _BY_NAME[name], gap) for name, gap in events
    ]
    left_out = [(_NOTHING if c is RATE_LIMIT else c, gap) for c, gap in recorded]
    assert _replay(recorded) == _replay(left_out)


_NOTHING = classify(Observation("client-abort"))  # no scope: the store records nothing


def test_a_run_of_rate_limits_never_trips_even_at_threshold_one() -> None:
    async def run() -> list[object]:
        store = InProcessHealthStore(HealthPolicy(failure_threshold=1))
        return [await store.record("a", "m", RATE_LIMIT, 0.6, 1_000.0 + i) for i in range(50)]

    assert asyncio.run(run()) == [[]] * 50


def test_every_rate_limit_shape_has_no_health_scope() -> None:
    for classification in (RATE_LIMIT, HEADERS_RATE_LIMIT):
        assert classification.rate_limited
        assert classification.health_scope is None


def test_an_overload_cools_for_the_short_window() -> None:
    async def run() -> float:
        store = InProcessHealthStore(HealthPolicy(failure_threshold=1, base_cooldown_s=30.0))
        (started,) = await store.record("a", "m", OVERLOAD, None, 1_000.0)
        assert started.until is not None
        return started.until - 1_000.0

    assert asyncio.run(run()) == 5.0


@given(
    base=st.floats(0.1, 600),
    overload=st.floats(0.1, 600),
    retry_after=st.none() | st.floats(0, 10_000),
    jitter=st.floats(0, 0.999),
)
def test_an_overload_window_is_never_longer_than_a_faults(
    base: float, overload: float, retry_after: float | None, jitter: float
) -> None:
    policy = HealthPolicy(
        base_cooldown_s=base, max_cooldown_s=600.0, overload_cooldown_s=overload, jitter=0.5
    )
    short = drawn_cooldown_s(policy, retry_after, lambda: jitter, overloaded=True)
    normal = drawn_cooldown_s(policy, retry_after, lambda: jitter)
    assert short <= normal
    assert short >= min(600.0, retry_after or 0.0)
