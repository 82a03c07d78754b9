"""Which daily evidence partitions exist, are wanted ahead, and go at a cutoff."""

from __future__ import annotations

from datetime import UTC, date, datetime

from hypothesis import given
from hypothesis import strategies as st

from leasegate.db.partitions import (
    day_start,
    days_to_drop,
    days_wanted,
    include_name,
    is_partition_name,
    partition_day,
    partition_name,
)


def test_names_and_days_round_trip() -> None:
    assert partition_name(date(2026, 12, 1)) == "evidence_p20261201"
    assert partition_day("evidence_p20261201") == date(2026, 12, 1)
    assert partition_day("evidence_default") is None
    assert partition_day("evidence") is None
    assert is_partition_name("evidence_default")
    assert not is_partition_name("evidence")
    assert not is_partition_name("keys")


def test_the_schema_comparison_skips_partitions_only() -> None:
    assert not include_name("evidence_p20261201", "table", {})
    assert include_name("evidence", "table", {})
    assert include_name("evidence_p20261201", "index", {})


def test_yesterday_today_and_the_days_ahead_are_wanted() -> None:
    assert days_wanted(date(2026, 12, 31), 2) == [
        date(2026, 12, 30),
        date(2026, 12, 31),
        date(2027, 1, 1),
        date(2027, 1, 2),
    ]


def test_a_day_starts_at_midnight_utc() -> None:
    assert day_start(date(2026, 3, 29)) == datetime(2026, 3, 29, tzinfo=UTC)


@given(
    days=st.lists(st.dates(date(2020, 1, 1), date(2030, 1, 1)), unique=True),
    before=st.dates(date(2020, 1, 1), date(2030, 1, 1)),
)
def test_exactly_the_whole_days_before_the_cutoff_are_dropped(
    days: list[date], before: date
) -> None:
    names = [partition_name(day) for day in days] + ["evidence_default", "other"]
    dropped = days_to_drop(names, before)
    assert dropped == sorted(partition_name(day) for day in days if day < before)
