"""The failed-authentication throttle (console sign-in and bearer tokens): failures per
address within a window, nothing else."""

from __future__ import annotations

from leasegate.control_plane.throttle import FailedAuthThrottle


def test_the_sixth_attempt_within_the_window_waits_for_the_oldest_failure_to_age() -> None:
    throttle = FailedAuthThrottle(max_failures=5, window_s=60)
    for second in range(5):
        assert throttle.wait_s("10.0.0.1", float(second)) is None
        throttle.failed("10.0.0.1", float(second))
    assert throttle.wait_s("10.0.0.1", 10.0) == 50.0
    assert throttle.wait_s("10.0.0.2", 10.0) is None  # another address is untouched
    assert throttle.wait_s("10.0.0.1", 60.0) is None  # the first failure is a window old
    throttle.failed("10.0.0.1", 60.0)
    assert throttle.wait_s("10.0.0.1", 60.5) == 0.5  # still five failures in the last minute


def test_a_success_clears_the_address() -> None:
    throttle = FailedAuthThrottle(max_failures=2, window_s=60)
    throttle.failed("a", 0.0)
    throttle.succeeded("a")
    throttle.failed("a", 1.0)
    assert throttle.wait_s("a", 1.0) is None


def test_the_table_stays_bounded_and_keeps_the_recent_guessers() -> None:
    throttle = FailedAuthThrottle(max_failures=1, window_s=60, max_addresses=3)
    for index, address in enumerate(["a", "b", "c", "d"]):
        throttle.failed(address, float(index))
    assert throttle.wait_s("a", 4.0) is None  # the least recently failed was dropped
    assert [throttle.wait_s(a, 4.0) is not None for a in ("b", "c", "d")] == [True] * 3
    throttle.failed("e", 200.0)  # everything else is stale by then
    assert [throttle.wait_s(a, 200.0) is not None for a in ("b", "c", "d", "e")] == [
        False,
        False,
        False,
        True,
    ]
