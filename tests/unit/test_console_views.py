"""What the console draws from plain records: a key's life and the capacity bars."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from leasegate.control_plane.console.pool import Bar, headroom
from leasegate.control_plane.console.reads import key_life
from leasegate.core.records import KeyRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def key(**changes: object) -> KeyRecord:
    fields: dict[str, object] = {
        "key_id": "k1",
        "secret_hash": "h",
        "mint_decision_id": "md_1",
        "tenant": "acme",
        "dispatch_id": "d",
        "model": "gpt-4o",
        "served_model": "gpt-4o-a",
        "account_id": "primary",
        "created_at": T0,
        "expires_at": T0 + timedelta(minutes=15),
        **changes,
    }
    return KeyRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "now", "ended"),
    [
        (key(), T0 + timedelta(minutes=1), ("live until", None)),
        (key(), T0 + timedelta(minutes=15), ("expired", None)),
        (key(revoked_at=T0, revoke_reason="renewed"), T0, ("renewed", None)),
        (key(revoked_at=T0, revoke_reason="revoked"), T0, ("revoked", None)),
        (key(revoked_at=T0, revoke_reason="account disabled"), T0, ("revoked", "account disabled")),
    ],
)
def test_a_keys_life_ends_as_its_row_says(
    record: KeyRecord, now: datetime, ended: tuple[str, str | None]
) -> None:
    minted, last = key_life(record, now)
    assert minted.what == "minted"
    assert (last.what, last.detail) == ended


def test_bars_say_when_nothing_is_counted_or_there_is_no_ceiling() -> None:
    assert (Bar(3, 4).percent, Bar(3, 4).label) == (75, "3 / 4")
    assert Bar(9, 4).percent == 100
    assert (Bar(None, None).percent, Bar(None, None).label) == (0, "not counted (no ceiling)")
    assert Bar(2, None).label == "2 (no ceiling)"


def test_a_cells_headroom_is_its_tightest_known_bucket() -> None:
    quota = {
        "model": "m",
        "source": "headers",
        "observed_at": "2026-01-01T00:00:00Z",
        "buckets": [
            {"dimension": "requests", "limit": 100, "remaining": 40, "reset": None},
            {"dimension": "tokens", "limit": 10_000, "remaining": 9_000, "reset": None},
            {"dimension": "output-tokens", "limit": 5, "remaining": None, "reset": None},
        ],
    }
    room = headroom(quota)
    assert room is not None
    assert room.label == "requests 40 / 100 (headers)"
    declared = {**quota, "source": "declared", "buckets": [quota["buckets"][2]]}
    assert headroom(declared) is None  # nothing known to draw
    assert headroom(None) is None
