"""The reservation table keeps its ceiling and returns each slot once, in any order of calls."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from leasegate.capacity.table import ReservationTable

LEASE_S = 10.0
HOLDERS = st.sampled_from([f"req-{i}" for i in range(8)])


def test_reserving_one_holder_twice_takes_one_slot() -> None:
    table = ReservationTable()
    assert table.reserve("a", capacity=2, now=0.0, lease_s=LEASE_S)
    assert table.reserve("a", capacity=2, now=1.0, lease_s=LEASE_S)
    assert table.held(now=1.0) == 1
    assert table.reserve("b", capacity=2, now=1.0, lease_s=LEASE_S)


def test_a_holder_already_in_renews_even_at_the_ceiling() -> None:
    table = ReservationTable()
    assert table.reserve("a", capacity=1, now=0.0, lease_s=LEASE_S)
    assert not table.reserve("b", capacity=1, now=0.0, lease_s=LEASE_S)
    assert table.reserve("a", capacity=1, now=9.0, lease_s=LEASE_S)
    assert table.holds("a", now=18.0)


def test_five_releases_return_one_slot() -> None:
    table = ReservationTable()
    table.reserve("a", capacity=1, now=0.0, lease_s=LEASE_S)
    assert [table.release("a") for _ in range(5)] == [True, False, False, False, False]
    assert table.held(now=0.0) == 0
    assert table.reserve("b", capacity=1, now=0.0, lease_s=LEASE_S)
    assert not table.reserve("c", capacity=1, now=0.0, lease_s=LEASE_S)


def test_releasing_a_stranger_changes_nothing() -> None:
    table = ReservationTable()
    table.reserve("a", capacity=1, now=0.0, lease_s=LEASE_S)
    assert not table.release("stranger")
    assert table.held(now=0.0) == 1
    assert not table.reserve("b", capacity=1, now=0.0, lease_s=LEASE_S)


def test_an_expired_holder_is_reclaimed_and_not_revived_by_renew() -> None:
    table = ReservationTable()
    table.reserve("dead", capacity=1, now=0.0, lease_s=LEASE_S)
    assert table.held(now=LEASE_S - 0.001) == 1
    assert table.held(now=LEASE_S) == 0
    table.renew(["dead"], now=LEASE_S + 1, lease_s=LEASE_S)
    assert table.held(now=LEASE_S + 1) == 0
    assert table.reserve("next", capacity=1, now=LEASE_S + 1, lease_s=LEASE_S)
    assert not table.release("dead")


def test_renewal_keeps_a_long_holder_alive_past_its_first_lease() -> None:
    table = ReservationTable()
    table.reserve("stream", capacity=1, now=0.0, lease_s=LEASE_S)
    for now in (5.0, 10.0 - 0.5, 15.0, 20.0):
        table.renew(["stream", "stranger"], now=now, lease_s=LEASE_S)
    assert table.held(now=29.0) == 1
    assert not table.reserve("other", capacity=1, now=29.0, lease_s=LEASE_S)
    assert table.held(now=30.0) == 0


class ReservationMachine(RuleBasedStateMachine):
    """Any interleaving of reserve, release, renew and time passing, over a few holders.

    The reference is what a user can observe: which holders were admitted and not yet given
    back, and when each one last reserved or renewed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.table = ReservationTable()
        self.capacity = 0
        self.now = 0.0
        self.live: dict[str, float] = {}

    @initialize(capacity=st.integers(0, 4))
    def set_capacity(self, capacity: int) -> None:
        self.capacity = capacity

    def _expire(self) -> None:
        self.live = {h: expiry for h, expiry in self.live.items() if expiry > self.now}

    @rule(holder=HOLDERS)
    def reserve(self, holder: str) -> None:
        self._expire()
        was_live = holder in self.live
        had_room = len(self.live) < self.capacity
        admitted = self.table.reserve(holder, self.capacity, self.now, LEASE_S)
        assert admitted == (was_live or had_room)
        if admitted:
            self.live[holder] = self.now + LEASE_S

    @rule(holder=HOLDERS, times=st.integers(1, 5))
    def release(self, holder: str, times: int) -> None:
        self._expire()
        results = [self.table.release(holder) for _ in range(times)]
        assert not any(results[1:])
        assert results[0] or holder not in self.live
        self.live.pop(holder, None)

    @rule(holders=st.lists(HOLDERS, max_size=4))
    def renew(self, holders: list[str]) -> None:
        self._expire()
        self.table.renew(holders, self.now, LEASE_S)
        for holder in holders:
            if holder in self.live:
                self.live[holder] = self.now + LEASE_S

    @rule(seconds=st.floats(0.0, LEASE_S * 1.5, allow_nan=False))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: self.capacity > 0)
    @rule()
    def a_full_table_refuses_a_stranger(self) -> None:
        self._expire()
        if len(self.live) == self.capacity:
            assert not self.table.reserve("stranger", self.capacity, self.now, LEASE_S)

    @invariant()
    def held_is_within_the_ceiling_and_equals_the_live_holders(self) -> None:
        self._expire()
        held = self.table.held(self.now)
        assert 0 <= held <= self.capacity
        assert held == len(self.live)
        assert all(self.table.holds(h, self.now) for h in self.live)


ReservationMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40)
TestReservationTable = ReservationMachine.TestCase
