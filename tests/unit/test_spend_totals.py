"""The running total's rules (`RunningTotal`) under any interleaving of requests finishing,
rows being written, rebuilds, reconciliations and losses of the store's data: nothing is ever
counted twice, and a reconciliation whose cut-off is after the last loss makes the total
exactly the spend of every finished request."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from leasegate.spend.totals import RunningTotal, reconcile_cutoff

MAX_RUN_S = 5.0
FLUSH_S = 1.0
SETTLE_S = MAX_RUN_S + FLUSH_S  # every row started before now - SETTLE_S is written


@dataclass(frozen=True)
class Request:
    start: float
    run: float
    flush: float
    tokens: int

    @property
    def end(self) -> float:
        return self.start + self.run

    @property
    def written(self) -> float:
        return self.end + self.flush


_REQUESTS = st.lists(
    st.builds(
        Request,
        start=st.floats(0, 60, allow_nan=False),
        run=st.floats(0, MAX_RUN_S, allow_nan=False),
        flush=st.floats(0, FLUSH_S, allow_nan=False),
        tokens=st.integers(1, 1000),
    ),
    max_size=30,
)
_CHECKS = st.lists(
    st.tuples(st.sampled_from(["reconcile", "lose"]), st.floats(0, 80, allow_nan=False)),
    max_size=12,
)


def _evidence(requests: list[Request], now: float, before: float) -> int:
    """What the evidence holds at `now` for rows started before `before`."""
    return sum(r.tokens for r in requests if r.written <= now and r.start < before)


@settings(max_examples=300, deadline=None)
@given(requests=_REQUESTS, checks=_CHECKS)
def test_no_request_is_counted_twice_and_reconciling_after_a_loss_is_exact(
    requests: list[Request], checks: list[tuple[str, float]]
) -> None:
    total = RunningTotal()
    total.rebase(0.0, 0, 0, only_if_unknown=True)  # the first budgeted request's rebuild
    events: list[tuple[float, int, str, Request | None]] = [
        (r.end, 0, "finish", r) for r in requests
    ]
    events += [(at, 1, kind, None) for kind, at in checks]
    lost_at: float | None = None
    for now, _, kind, request in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == "finish":
            assert request is not None
            total.add(request.tokens, 0, request.start)
        elif kind == "lose":
            total = RunningTotal()
            lost_at = now
        else:
            cutoff = reconcile_cutoff(now, SETTLE_S)
            only = not total.known
            total.rebase(cutoff, _evidence(requests, now, cutoff), 0, only_if_unknown=only)
            finished = sum(r.tokens for r in requests if r.end <= now)
            if lost_at is None or cutoff > lost_at:
                assert total.tokens == finished
        if total.known:
            assert total.tokens <= sum(r.tokens for r in requests if r.end <= now)
