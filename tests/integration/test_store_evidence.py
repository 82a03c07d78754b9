"""Evidence rows: every field round-trips, replays are ignored, reads are newest first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta

from leasegate.core.records import EvidenceRow
from leasegate.db import Store
from tests.fixtures.evidence import evidence_row
from tests.fixtures.storage import T0


def _row(request_id: str, *, seconds: float = 0, **changes: object) -> EvidenceRow:
    row = replace(
        evidence_row(request_id, T0 + timedelta(seconds=seconds)),
        served_model="gpt-4o-2024-08-06",
        stream=True,
        upstream_status=429,
        outcome="upstream-error",
        error_code="http-429",
        scope="model",
        qualifying=True,
        input_tokens=1200,
        output_tokens=0,
        cache_read_input_tokens=1024,
        first_byte_ms=12.5,
        duration_ms=830.25,
        malformed_chunks=2,
    )
    return replace(row, **changes)  # type: ignore[arg-type]


async def test_every_field_round_trips(store: Store) -> None:
    full = _row("req-full", started_at=T0 + timedelta(microseconds=123456))
    sparse = _row(
        "req-sparse",
        key_id=None,
        mint_decision_id=None,
        account_id=None,
        requested_model=None,
        served_model=None,
        stream=False,
        upstream_status=None,
        outcome="refused",
        refusal_reason="key-invalid",
        error_code=None,
        scope=None,
        qualifying=False,
        input_tokens=None,
        output_tokens=None,
        cache_read_input_tokens=None,
        first_byte_ms=None,
        malformed_chunks=0,
    )

    await store.write_evidence([full, sparse])

    read = {row.request_id: row for row in await store.query_evidence()}
    assert read == {"req-full": full, "req-sparse": sparse}
    assert read["req-full"].started_at.tzinfo == UTC


async def test_replayed_rows_are_ignored(store: Store) -> None:
    first = _row("req-1", outcome="success", upstream_status=200)
    await store.write_evidence([first])

    await store.write_evidence([replace(first, outcome="timeout"), _row("req-2"), _row("req-2")])
    await store.write_evidence([])

    rows = await store.query_evidence()
    assert sorted(row.request_id for row in rows) == ["req-1", "req-2"]
    assert next(row for row in rows if row.request_id == "req-1") == first


async def test_queries_are_newest_first_and_filter(store: Store) -> None:
    await store.write_evidence(
        [
            _row("req-a", seconds=0, mint_decision_id="md_1", account_id="openai-main"),
            _row("req-b", seconds=2, mint_decision_id="md_1", account_id="openai-main"),
            _row("req-c", seconds=1, mint_decision_id="md_2", account_id="openrouter"),
            _row("req-d", seconds=3, mint_decision_id="md_3", account_id="openai-main"),
        ]
    )

    async def ids(**filters: object) -> list[str]:
        return [row.request_id for row in await store.query_evidence(**filters)]  # type: ignore[arg-type]

    assert await ids() == ["req-d", "req-b", "req-c", "req-a"]
    assert await ids(decision_id="md_1") == ["req-b", "req-a"]
    assert await ids(account_id="openai-main") == ["req-d", "req-b", "req-a"]
    assert await ids(since=T0 + timedelta(seconds=1)) == ["req-d", "req-b", "req-c"]
    assert await ids(account_id="openai-main", since=T0 + timedelta(seconds=1)) == [
        "req-d",
        "req-b",
    ]
    assert await ids(limit=2) == ["req-d", "req-b"]
    assert await ids(decision_id="md_none") == []


async def test_evidence_grouped_by_decision(store: Store) -> None:
    await store.write_evidence(
        [
            _row("req-a", seconds=0, mint_decision_id="md_1"),
            _row("req-b", seconds=1, mint_decision_id="md_1"),
            _row("req-c", seconds=2, mint_decision_id="md_2"),
        ]
    )

    grouped = await store.evidence_for_decisions(["md_1", "md_2", "md_3"])

    assert {d: [r.request_id for r in rows] for d, rows in grouped.items()} == {
        "md_1": ["req-b", "req-a"],
        "md_2": ["req-c"],
        "md_3": [],
    }
    assert await store.evidence_for_decisions([]) == {}
