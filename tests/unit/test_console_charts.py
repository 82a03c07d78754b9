"""The console's inline SVG bars: scaled to the largest value, within the chart, in order;
the traffic chart's buckets and its failures drawn to their requests' scale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from leasegate.control_plane.console.charts import HEIGHT, WIDTH, bars
from leasegate.control_plane.console.traffic import account_traffic, bucket_starts
from leasegate.core.ports.browse import TrafficPoint


@given(st.lists(st.floats(min_value=-1e6, max_value=1e9), min_size=1, max_size=40))
def test_bars_fit_the_chart_and_the_largest_fills_it(values: list[float]) -> None:
    drawn = bars([(str(i), v) for i, v in enumerate(values)])
    assert [b.label for b in drawn] == [str(i) for i in range(len(values))]
    for bar in drawn:
        assert 0 <= bar.x
        assert bar.x + bar.width <= WIDTH + 0.01
        assert 0 <= bar.height <= HEIGHT
        assert abs(bar.y + bar.height - HEIGHT) < 0.02  # standing on the baseline
    if max(values) > 0:
        assert max(b.height for b in drawn) == HEIGHT


def test_no_points_no_bars_and_values_are_titled() -> None:
    assert bars([]) == []
    (bar,) = bars([("2026-12-02", 3.5)], ["3.50 USD"])
    assert (bar.height, bar.value) == (HEIGHT, "3.50 USD")


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=60))
def test_failures_are_drawn_to_their_requests_scale_never_above_them(
    counts: list[tuple[int, int]],
) -> None:
    counts = [(total, min(failed, total)) for total, failed in counts]
    start = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
    starts = [start + timedelta(seconds=60 * i) for i in range(len(counts))]
    points = [
        TrafficPoint("a", s, total, failed)
        for s, (total, failed) in zip(starts, counts, strict=True)
        if total
    ]
    (chart,) = account_traffic(["a"], points, starts)
    assert (chart.requests, chart.failures) == tuple(map(sum, zip(*counts, strict=True)))
    assert len(chart.bars) == len(starts)  # every bucket, zero where nothing started
    for (requests, failures), (total, failed) in zip(chart.bars, counts, strict=True):
        assert failures.height <= requests.height
        assert (requests.height > 0) == (total > 0)
        assert requests.value == f"{total} requests, {failed} failed"


def test_buckets_cover_the_range_aligned_to_the_epoch_and_rows_without_account_show() -> None:
    since = datetime(2026, 12, 3, 8, 0, 45, tzinfo=UTC)
    starts = bucket_starts(since, since + timedelta(minutes=15), 30)
    assert starts[0] == datetime(2026, 12, 3, 8, 0, 30, tzinfo=UTC)
    assert len(starts) == 31
    # a bucket begun a fraction of a second before the range ends is drawn (its rows count)
    just_begun = bucket_starts(since, datetime(2026, 12, 3, 8, 15, 0, 400_000, tzinfo=UTC), 30)
    assert just_begun[-1] == datetime(2026, 12, 3, 8, 15, 0, tzinfo=UTC)
    exact = bucket_starts(since, datetime(2026, 12, 3, 8, 15, 0, tzinfo=UTC), 30)
    assert exact[-1] == datetime(2026, 12, 3, 8, 14, 30, tzinfo=UTC)
    points = [TrafficPoint(None, starts[1], 2, 2)]
    charts = account_traffic(["a", "b"], points, starts)
    assert [(c.account, c.requests, c.failures) for c in charts] == [
        ("a", 0, 0),
        ("b", 0, 0),
        ("(no account)", 2, 2),
    ]
