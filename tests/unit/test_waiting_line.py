"""A tenant's line of dispatches waiting for a full pool (`capacity.waiting`), property-tested
against the plainest model of it: a list in order of first refusal, whose entries leave when
served or when they stopped asking `ACTIVE_S` ago."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.capacity.waiting import ACTIVE_S, Waiting

DISPATCHES = ("d0", "d1", "d2", "d3", "d4")
steps = st.lists(
    st.tuples(
        st.sampled_from(("refused", "served", "later")),
        st.sampled_from(DISPATCHES),
        st.sampled_from((0.0, 0.5, 2.0, ACTIVE_S + 0.5)),
    ),
    max_size=40,
)


@given(steps)
def test_the_line_is_the_order_of_first_refusal_among_those_still_asking(
    run: list[tuple[str, str, float]],
) -> None:
    line = Waiting()
    model: list[tuple[str, float]] = []  # (dispatch, last asked), in order of first refusal
    now = 0.0
    for action, dispatch, wait in run:
        if action == "later":
            now += wait
        model = [(d, last) for d, last in model if now - last <= ACTIVE_S]
        if action == "refused":
            if dispatch in dict(model):
                model = [(d, now if d == dispatch else last) for d, last in model]
            else:
                model.append((dispatch, now))
            line.refused("m", "t", dispatch, now)
        elif action == "served":
            model = [(d, last) for d, last in model if d != dispatch]
            line.served("m", "t", dispatch)
        order = [d for d, _ in model]
        for d in DISPATCHES:
            expected = order.index(d) if d in order else len(order)
            assert line.ahead("m", "t", d, now) == expected
        heads = [d for d in DISPATCHES if line.head("m", "t", d, now)]
        assert heads == order[:1]
        assert line.ahead("m", "other-tenant", "d0", now) == 0  # lines are per tenant


def test_what_is_kept_follows_what_still_waits() -> None:
    """Thousands of dispatches turned away once and never back leave nothing behind once a
    later refusal (of anyone) finds them silent past `ACTIVE_S`."""
    line = Waiting()
    for n in range(5_000):
        line.refused("m", f"tenant-{n % 7}", f"d{n}", 0.0)
    assert len(line) == 5_000
    line.refused("m", "tenant-0", "late", ACTIVE_S + 1.0)
    assert len(line) == 1
