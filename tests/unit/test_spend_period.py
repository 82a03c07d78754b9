"""Tenant budget periods: UTC days and months, their ends (leap years, year ends), and the
`retry_after_s` a refusal carries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.spend import Period, period_end, period_start, seconds_left, tenant_total_id


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "period", "start", "end"),
    [
        ("2026-12-01T13:45:00", "day", "2026-12-01T00:00:00", "2026-12-02T00:00:00"),
        ("2026-12-31T23:59:59.999999", "day", "2026-12-31T00:00:00", "2027-01-01T00:00:00"),
        ("2026-12-31T23:59:59", "month", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
        ("2028-02-28T10:00:00", "day", "2028-02-28T00:00:00", "2028-02-29T00:00:00"),
        ("2028-02-29T10:00:00", "month", "2028-02-01T00:00:00", "2028-03-01T00:00:00"),
        ("2027-02-28T10:00:00", "day", "2027-02-28T00:00:00", "2027-03-01T00:00:00"),
        ("2027-02-10T00:00:00", "month", "2027-02-01T00:00:00", "2027-03-01T00:00:00"),
        ("2026-01-31T00:00:00", "month", "2026-01-01T00:00:00", "2026-02-01T00:00:00"),
    ],
)
def test_a_period_is_the_utc_calendar_day_or_month_containing_now(
    now: str, period: Period, start: str, end: str
) -> None:
    assert period_start(at(now), period) == at(start)
    assert period_end(at(now), period) == at(end)


def test_the_first_instant_of_a_period_belongs_to_it_and_the_last_to_the_one_before() -> None:
    midnight = at("2026-12-02T00:00:00")
    assert period_start(midnight, "day") == midnight
    assert period_end(midnight - timedelta(microseconds=1), "day") == midnight


def test_periods_are_utc_whatever_zone_now_is_given_in() -> None:
    tokyo = datetime(2026, 12, 2, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # 23:00 UTC, Dec 1
    assert period_start(tokyo, "day") == at("2026-12-01T00:00:00")
    assert seconds_left(tokyo, "day") == 3600.0


def test_retry_after_is_the_time_left_in_the_period() -> None:
    assert seconds_left(at("2026-12-01T23:59:30"), "day") == 30.0
    assert seconds_left(at("2028-02-29T00:00:00"), "month") == 86_400.0
    assert seconds_left(at("2026-11-30T12:00:00"), "month") == 43_200.0


def test_each_period_has_its_own_running_total() -> None:
    assert tenant_total_id("acme", "day", at("2026-12-01T10:00:00")) == "tenant:acme:day:2026-12-01"
    assert (
        tenant_total_id("acme", "month", at("2026-12-31T10:00:00")) == "tenant:acme:month:2026-12"
    )
    assert tenant_total_id("acme", "day", at("2026-12-02T00:00:00")).endswith("2026-12-02")


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1)),  # noqa: DTZ001 - hypothesis bounds are naive; zone added below
    st.sampled_from(["day", "month"]),
)
def test_now_lies_in_its_period_and_the_end_starts_the_next(
    naive: datetime, period: Period
) -> None:
    now = naive.replace(tzinfo=UTC)
    start, end = period_start(now, period), period_end(now, period)
    assert start <= now < end
    assert period_start(end, period) == end
    assert 0 < seconds_left(now, period) <= 31 * 86_400
    assert tenant_total_id("t", period, now) != tenant_total_id("t", period, end)
