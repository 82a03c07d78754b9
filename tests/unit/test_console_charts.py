"""The console's inline SVG bars: scaled to the largest value, within the chart, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.control_plane.console.charts import HEIGHT, WIDTH, bars


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
