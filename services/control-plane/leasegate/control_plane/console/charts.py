"""Small charts drawn on the server as inline SVG geometry (no script, no other origin).

Pure: a series of (label, value) becomes bars scaled to the chart's height; the template
draws them as `<rect>`s with a `<title>` each (the exact value on hover and for screen
readers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 120


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: str


def bars(
    points: Sequence[tuple[str, float]],
    shown: Sequence[str] | None = None,
    top: float | None = None,
) -> list[Bar]:
    """One bar per point, left to right, the largest value (or `top`, to draw several series
    to one scale) filling the height; negative values are drawn as zero. `shown` is each
    value's text (default: the number)."""
    if not points:
        return []
    if top is None:
        top = max(max(value for _, value in points), 0.0)
    slot = WIDTH / len(points)
    drawn = []
    for i, (label, value) in enumerate(points):
        height = 0.0 if top <= 0 else HEIGHT * min(max(value, 0.0), top) / top
        text = shown[i] if shown is not None else f"{value:g}"
        drawn.append(
            Bar(
                x=round(i * slot + slot * 0.1, 2),
                y=round(HEIGHT - height, 2),
                width=round(slot * 0.8, 2),
                height=round(height, 2),
                label=label,
                value=text,
            )
        )
    return drawn
