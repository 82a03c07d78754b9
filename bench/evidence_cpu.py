"""`python -m bench.evidence_cpu`: the evidence writer's CPU per row on Postgres, two ways.

- `orm`: the former path, SQLAlchemy's `insert(...).on_conflict_do_nothing()` executed with a
  list of per-row dicts (the row copied into a dict, then into SQLAlchemy's parameters);
- `asyncpg`: the current path (`leasegate.db.evidence_write`), one prepared
  `INSERT … SELECT * FROM unnest(…)` per batch, column arrays read straight off the rows.

Each method writes ROWS rows in batches of BATCH into a fresh, migrated database of its own,
after one warm-up batch. Reported: this process's CPU (user + system) per row, and the
Postgres backend CPU per row is not included (it is another process). Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.dialects import postgresql

from bench.stack import fresh_database
from leasegate.core.records import EvidenceRow
from leasegate.db import Store, upgrade
from leasegate.db.evidence_write import write_rows
from leasegate.db.models import EvidenceRecordRow

BATCH = 500
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TEMPLATE = EvidenceRow(
    request_id="",
    key_id="k0123456789abcdef01234567",
    mint_decision_id="md_0123456789abcdef",
    account_id="openai-main",
    requested_model="gpt-4o",
    served_model="gpt-4o-2024-08-06",
    endpoint="/v1/chat/completions",
    stream=True,
    upstream_status=200,
    outcome="success",
    refusal_reason=None,
    error_code=None,
    scope=None,
    qualifying=False,
    input_tokens=1200,
    output_tokens=300,
    cache_read_input_tokens=1024,
    cache_creation_input_tokens=None,
    started_at=T0,
    first_byte_ms=12.5,
    duration_ms=830.25,
)
_FIELDS = tuple(f.name for f in fields(EvidenceRow))

Writer = Callable[[Store, Sequence[EvidenceRow]], Awaitable[None]]


async def orm_write(store: Store, rows: Sequence[EvidenceRow]) -> None:
    statement = postgresql.insert(EvidenceRecordRow).on_conflict_do_nothing(
        index_elements=[EvidenceRecordRow.request_id]
    )
    values: list[dict[str, Any]] = [{n: getattr(r, n) for n in _FIELDS} for r in rows]
    async with store.db.session() as session:
        await session.execute(statement, values)


async def asyncpg_write(store: Store, rows: Sequence[EvidenceRow]) -> None:
    await write_rows(store.db, rows)


def _rows(method: str, count: int) -> list[EvidenceRow]:
    return [
        replace(TEMPLATE, request_id=f"req_{method}_{i:09d}", started_at=T0 + timedelta(seconds=i))
        for i in range(count)
    ]


async def _measure(url: str, method: str, write: Writer, count: int) -> tuple[float, float]:
    store = Store.connect(url)
    try:
        rows = _rows(method, count + BATCH)
        await write(store, rows[:BATCH])  # warm-up: connection, prepared statement
        rows = rows[BATCH:]
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, len(rows), BATCH):
            await write(store, rows[start : start + BATCH])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return cpu, wall
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    methods: dict[str, Writer] = {"orm": orm_write, "asyncpg": asyncpg_write}
    results: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(args.repeat):
        for name, write in methods.items():
            with fresh_database() as url:
                upgrade(url)
                cpu, wall = asyncio.run(_measure(url, name, write, args.rows))
            results[name].append(cpu * 1e6 / args.rows)
            print(
                f"{name:8} {args.rows} rows: {cpu * 1e6 / args.rows:7.2f} µs CPU/row, "
                f"{args.rows / wall:9.0f} rows/s"
            )
    for name, per_row in results.items():
        per_row.sort()
        print(
            f"{name:8} median {per_row[len(per_row) // 2]:7.2f} µs CPU/row "
            f"[{per_row[0]:.2f}-{per_row[-1]:.2f}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
