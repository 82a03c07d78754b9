"""When the evidence writer writes the rows waiting in memory (`write_due`): lone rows at
once, rows of a steady rate together, nothing kept longer than twice the linger past the
flush interval, and a linger of 0 is the writer without one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from leasegate.proxy.evidence import write_due

times = st.floats(min_value=0, max_value=1_000, allow_nan=False)
spans = st.floats(min_value=0, max_value=10, allow_nan=False)
Situation = dict[str, Any]


@st.composite
def situations(draw: st.DrawFn) -> Situation:
    began = draw(times)
    oldest_at = began + draw(spans)
    now = oldest_at + draw(spans)
    return {
        "now": now,
        "rows": draw(st.integers(min_value=1, max_value=1_000)),
        "oldest_at": oldest_at,
        "began": began,
        "retry_at": draw(st.one_of(st.just(0.0), times)),
        "interval_s": draw(st.floats(min_value=0.001, max_value=1)),
        "linger_s": draw(st.floats(min_value=0, max_value=2)),
        "linger_rows": draw(st.integers(min_value=1, max_value=100)),
        "max_batch": draw(st.integers(min_value=1, max_value=500)),
    }


@given(situations())
def test_no_row_waits_past_the_backoff_the_interval_and_twice_the_linger(s: Situation) -> None:
    due = write_due(**s)
    assert due >= s["retry_at"]
    bound = max(s["began"] + s["interval_s"], s["oldest_at"] + 2 * s["linger_s"])
    assert due <= max(s["retry_at"], bound)


@given(situations())
def test_a_full_batch_goes_once_the_backoff_allows(s: Situation) -> None:
    s["rows"] = s["max_batch"]
    assert write_due(**s) == s["retry_at"]


@given(situations())
def test_batches_begin_an_interval_apart_unless_full(s: Situation) -> None:
    if s["rows"] < s["max_batch"]:
        assert write_due(**s) >= s["began"] + s["interval_s"]


@given(situations())
def test_without_a_linger_each_row_opens_a_flush_intervals_window(s: Situation) -> None:
    s["linger_s"] = 0.0
    if s["rows"] < s["max_batch"]:
        expected = max(s["began"] + s["interval_s"], s["retry_at"], s["oldest_at"])
        assert write_due(**s) == expected


@given(situations())
def test_a_row_alone_at_a_low_rate_is_not_held(s: Situation) -> None:
    """The last batch began a linger or more before the oldest row arrived: nothing to batch
    it with, so it waits for nothing but the interval and the backoff."""
    s["oldest_at"] = s["began"] + s["linger_s"] + 0.001
    s["now"] = max(s["now"], s["oldest_at"])
    if s["rows"] < s["max_batch"]:
        assert write_due(**s) == max(s["began"] + s["interval_s"], s["retry_at"], s["oldest_at"])


@given(situations())
def test_rows_that_lingered_or_filled_the_linger_go_now(s: Situation) -> None:
    s["oldest_at"] = s["began"]  # close behind the last batch
    s["now"] = s["oldest_at"] + s["linger_s"] * 1.001 + 1e-9  # past it, whatever the rounding
    if s["rows"] < s["max_batch"] and s["linger_s"] > 0:
        expected = max(s["began"] + s["interval_s"], s["retry_at"], s["now"])
        assert write_due(**s) == expected


def test_rows_close_behind_a_batch_wait_for_the_linger_or_a_later_row() -> None:
    due = write_due(
        now=10.1,
        rows=3,
        oldest_at=10.0,
        began=9.9,
        retry_at=0.0,
        interval_s=0.05,
        linger_s=0.5,
        linger_rows=50,
        max_batch=500,
    )
    assert due == 11.0  # the timer's bound; a row arriving after 10.5 writes them sooner
