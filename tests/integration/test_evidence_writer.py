"""The evidence writer on real databases: a row the database refuses is isolated and
dead-lettered while every other row is written; an unreachable database loses nothing; past
the memory bound rows go to the spill file and are replayed exactly once, also by a successor
process that adopts the file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from leasegate.core.records import EvidenceRow
from leasegate.db import Store
from leasegate.proxy.evidence import DEAD_LETTER_EVENT, STALL_S, EvidenceSink
from leasegate.proxy.evidence_metrics import EvidenceMetrics
from leasegate.proxy.evidence_spill import SpillFile
from leasegate.web.logs import JsonFormatter
from tests.fixtures.evidence import evidence_row
from tests.fixtures.servers import free_port
from tests.fixtures.storage import T0

BASE = replace(
    evidence_row("req-0", T0),
    served_model="gpt-4o-2024-08-06",
    input_tokens=10,
    output_tokens=5,
    first_byte_ms=1.5,
    duration_ms=3.25,
)


def rows(count: int, prefix: str = "req") -> list[EvidenceRow]:
    return [
        replace(BASE, request_id=f"{prefix}-{i}", started_at=T0 + timedelta(milliseconds=i))
        for i in range(count)
    ]


async def written_ids(store: Store) -> list[str]:
    return [row.request_id for row in await store.query_evidence(limit=1000)]


def spill_files(root: Path) -> list[Path]:
    return list(root.rglob("*.jsonl"))


def _unwritable(store: Store) -> list[EvidenceRow]:
    """Rows no database can take, whatever the boundary validation let through."""
    bad = [
        replace(BASE, request_id="bad-surrogate", requested_model="gpt-x\ud800"),
        replace(BASE, request_id="bad-long-id", account_id="a" * 65),
    ]
    if store.db.dialect == "postgresql":  # SQLite stores a NUL happily
        bad.append(replace(BASE, request_id="bad-nul", requested_model="gpt-x\x00 secret"))
    return bad


async def test_a_refused_row_is_dead_lettered_and_every_other_row_is_written(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    good = rows(300)
    bad = _unwritable(store)
    if store.db.dialect == "sqlite":
        bad = bad[:1]  # SQLite does not enforce VARCHAR lengths either
    mixed = good[:100] + bad[:1] + good[100:250] + bad[1:] + good[250:]
    sink = EvidenceSink(store, flush_interval_s=0.01, max_batch=500)
    for row in mixed:
        sink.add(row)

    with caplog.at_level(logging.ERROR, logger="leasegate.evidence"):
        assert await sink.drain(within_s=10)

    assert sorted(await written_ids(store)) == sorted(r.request_id for r in good)
    assert sink.dead_lettered == len(bad)
    assert sink.pending == 0
    letters = [r for r in caplog.records if r.getMessage() == DEAD_LETTER_EVENT]
    assert sorted(r.request_id for r in letters) == sorted(r.request_id for r in bad)  # type: ignore[attr-defined]
    for letter in letters:
        assert letter.key_id == BASE.key_id  # type: ignore[attr-defined]
        assert letter.reason  # type: ignore[attr-defined]
        line = JsonFormatter().format(letter)
        assert "secret" not in line
        assert json.loads(line)["event"] == DEAD_LETTER_EVENT

    # the writer keeps working for later rows
    sink.add(replace(BASE, request_id="later"))
    assert await sink.drain(within_s=10)
    assert "later" in await written_ids(store)


async def test_a_refused_qualifying_row_is_dead_lettered_without_failing_the_caller(
    store: Store,
) -> None:
    sink = EvidenceSink(store, flush_interval_s=0.01)
    for row in _unwritable(store)[:1]:
        await sink.add_durable(replace(row, qualifying=True))
    await sink.add_durable(replace(BASE, request_id="fine", qualifying=True))

    assert await written_ids(store) == ["fine"]  # written at once, no flush needed
    assert sink.dead_lettered == 1
    assert sink.pending == 0


@pytest.mark.postgres
async def test_an_unreachable_database_loses_nothing_and_dead_letters_nothing(
    tmp_path: Path,
) -> None:
    down = Store.connect(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere")
    sink = EvidenceSink(down, flush_interval_s=0.01, durable_timeout_s=0.5)
    try:
        for row in rows(20):
            sink.add(row)
        await sink.add_durable(replace(BASE, request_id="qualifying", qualifying=True))
        assert not await sink.drain(within_s=0.5)
        assert sink.pending == 21
        assert sink.dead_lettered == 0
    finally:
        await down.close()


@pytest.mark.postgres
async def test_a_silent_database_holds_a_qualifying_response_no_longer_than_the_deadline() -> None:
    """A database that accepts connections and never answers (a partition): the qualifying
    row is queued after `durable_timeout_s`, and the next one is queued without waiting."""
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()  # until the client gives up

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    down = Store.connect(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/nowhere")
    sink = EvidenceSink(down, flush_interval_s=0.01, durable_timeout_s=0.3)
    try:
        async with asyncio.timeout(2.5):  # below the 3 s connect deadline: ours decides
            await sink.add_durable(replace(BASE, request_id="q-1", qualifying=True))
            await sink.add_durable(replace(BASE, request_id="q-2", qualifying=True))
        assert sink.pending == 2
    finally:
        await down.close()
        silent.close()
        for writer in accepted:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        await silent.wait_closed()


async def test_past_the_memory_bound_rows_spill_and_are_replayed_once(
    store: Store, tmp_path: Path
) -> None:
    url = str(store.db.engine.url.render_as_string(hide_password=False))
    spill = SpillFile.open(tmp_path, url)
    sink = EvidenceSink(store, flush_interval_s=0.01, memory_rows=10, spill=spill, max_batch=7)
    all_rows = rows(100)
    for row in all_rows:
        sink.add(row)
    assert sink.pending == 100
    assert spill.pending == 90  # 10 in memory, the rest on disk

    # a replay of rows already written (a crash after the write, before the offset moved)
    await store.write_evidence(all_rows[40:60])
    assert await sink.drain(within_s=10)

    assert sorted(await written_ids(store)) == sorted(r.request_id for r in all_rows)
    assert sink.pending == 0
    assert spill.size_bytes == 0
    await sink.stop(drain_s=1)


async def test_a_full_disk_keeps_rows_in_memory_and_says_so(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The spill file's descriptor is pointed at /dev/full, which answers every write with
    ENOSPC: rows past the memory bound stay in memory (up to twice the bound), each refusal is
    logged and counted, and none is lost while memory allows."""
    url = str(store.db.engine.url.render_as_string(hide_password=False))
    registry = CollectorRegistry()
    spill = SpillFile.open(tmp_path, url)
    sink = EvidenceSink(
        store,
        flush_interval_s=0.01,
        memory_rows=10,
        spill=spill,
        metrics=EvidenceMetrics(registry),
    )
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, spill.own_fd)
        with caplog.at_level(logging.ERROR, logger="leasegate.evidence"):
            for row in rows(15):
                sink.add(row)
    finally:
        os.close(full)
    assert registry.get_sample_value("leasegate_evidence_spill_failures_total") == 5
    assert sum(r.getMessage() == "evidence spill write failed" for r in caplog.records) == 5
    assert sink.dropped == 0
    assert sink.pending == 15
    assert await sink.drain(within_s=10)  # the database is fine: every row kept in memory lands
    assert len(await written_ids(store)) == 15
    await sink.stop(drain_s=1)


async def test_a_successor_process_replays_its_predecessors_spill(
    store: Store, tmp_path: Path
) -> None:
    url = str(store.db.engine.url.render_as_string(hide_password=False))
    down = Store.connect(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere")
    first = EvidenceSink(
        down, flush_interval_s=0.01, memory_rows=5, spill=SpillFile.open(tmp_path, url)
    )
    try:
        first.start()
        for row in rows(50):
            first.add(row)
        await first.stop(drain_s=0.3)  # the database is down: memory rows go to the file too
    finally:
        await down.close()
    assert await written_ids(store) == []

    # another database's spill directory is never touched
    other = SpillFile.open(tmp_path, url + "-other")
    assert other.pending == 0
    other.close()

    successor = EvidenceSink(store, flush_interval_s=0.01, spill=SpillFile.open(tmp_path, url))
    assert successor.pending == 50
    assert await successor.drain(within_s=10)
    await successor.stop(drain_s=1)

    assert sorted(await written_ids(store)) == sorted(r.request_id for r in rows(50))
    assert await asyncio.to_thread(spill_files, tmp_path) == []


def _lines_on_disk(root: Path) -> int:
    """Rows in the spill files as another process would read them (after a kill -9)."""
    return sum(path.read_bytes().count(b"\n") for path in spill_files(root))


async def _until(check: Callable[[], bool], within_s: float) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within_s, f"not within {within_s} s"
        await asyncio.sleep(0.005)
    return time.monotonic() - started


@pytest.mark.postgres
async def test_rows_of_a_refused_database_reach_the_spill_file_within_a_flush_interval(
    tmp_path: Path,
) -> None:
    """Far below the memory bound: a database that refuses connections sends every waiting
    row to disk by the next flush, and every later row straight there, so a process killed
    now loses none of them."""
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere"
    down = Store.connect(url)
    sink = EvidenceSink(down, flush_interval_s=0.05, spill=SpillFile.open(tmp_path, url))
    sink.start()
    try:
        for row in rows(20):
            sink.add(row)
        await _until(lambda: _lines_on_disk(tmp_path) == 20, within_s=2)
        for row in rows(10, prefix="later"):
            sink.add(row)
            assert _lines_on_disk(tmp_path) > 20  # written through at once
        await _until(lambda: _lines_on_disk(tmp_path) == 30, within_s=0.2)
    finally:
        await sink.stop(drain_s=0.1)
        await down.close()


@pytest.mark.postgres
async def test_rows_of_a_hanging_database_reach_the_spill_file_after_the_stall_time(
    tmp_path: Path,
) -> None:
    """A database that accepts connections and never answers: once a batch has been
    unfinished for `STALL_S`, its rows and every later one are on disk."""
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{silent.sockets[0].getsockname()[1]}/x"
    down = Store.connect(url)
    sink = EvidenceSink(down, flush_interval_s=0.05, spill=SpillFile.open(tmp_path, url))
    sink.start()
    try:
        for row in rows(20):
            sink.add(row)
        took = await _until(lambda: _lines_on_disk(tmp_path) == 20, within_s=STALL_S + 1)
        assert took >= STALL_S - 0.1
        sink.add(replace(BASE, request_id="later"))
        assert _lines_on_disk(tmp_path) == 21
    finally:
        await sink.stop(drain_s=0.1)
        await down.close()
        silent.close()
        for writer in accepted:
            writer.close()
        await silent.wait_closed()


async def test_a_database_that_takes_every_batch_leaves_the_spill_file_untouched(
    store: Store, tmp_path: Path
) -> None:
    """(A stall time no write reaches even on a loaded machine: a write slower than the
    default 1 s would copy its rows to disk, by design.)"""
    url = str(store.db.engine.url.render_as_string(hide_password=False))
    sink = EvidenceSink(
        store, flush_interval_s=0.01, spill=SpillFile.open(tmp_path, url), stall_s=60
    )
    sink.start()
    try:
        for batch in range(10):
            for row in rows(50, prefix=f"b{batch}"):
                sink.add(row)
            await asyncio.sleep(0.02)
        assert await sink.drain(within_s=10)
        assert len(await written_ids(store)) == 500
        assert _lines_on_disk(tmp_path) == 0
        assert all(path.stat().st_size == 0 for path in spill_files(tmp_path))
    finally:
        await sink.stop(drain_s=1)


class _SlowToAnswer:
    """A database that takes every batch, each after `delay_s` (a busy server)."""

    def __init__(self, store: Store, delay_s: float) -> None:
        self._store, self._delay_s = store, delay_s

    async def write_evidence(self, batch: Sequence[EvidenceRow]) -> None:
        await asyncio.sleep(self._delay_s)
        await self._store.write_evidence(batch)


async def test_a_drain_waits_for_the_batch_being_written(store: Store) -> None:
    """Rows the background writer has taken from memory are not written until the database
    answers: they still count as pending, and a drain returns only once they are in."""
    sink = EvidenceSink(_SlowToAnswer(store, delay_s=0.3), flush_interval_s=0.01)
    sink.start()
    try:
        for row in rows(50):
            sink.add(row)
        await asyncio.sleep(0.1)  # the background batch is on its way to the database
        assert sink.pending == 50
        assert await sink.drain(within_s=5)
        assert len(await written_ids(store)) == 50
    finally:
        await sink.stop(drain_s=1)


@pytest.mark.postgres
async def test_a_batch_in_flight_when_the_writer_stops_is_kept_for_the_successor(
    tmp_path: Path,
) -> None:
    """The database hangs; the writer is stopped while a batch write is still waiting on it
    (before the stall time): the drain gives up, and that batch too lands in the spill file."""
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{silent.sockets[0].getsockname()[1]}/x"
    down = Store.connect(url)
    sink = EvidenceSink(down, flush_interval_s=0.05, spill=SpillFile.open(tmp_path, url))
    sink.start()
    try:
        for row in rows(20):
            sink.add(row)
        await asyncio.sleep(0.2)  # the first batch is in flight, nothing on disk yet
        assert _lines_on_disk(tmp_path) == 0
        await sink.stop(drain_s=0.2)
        assert _lines_on_disk(tmp_path) == 20
    finally:
        await down.close()
        silent.close()
        for writer in accepted:
            writer.close()
        await silent.wait_closed()


class _Batches:
    """The database, with the size of every batch it was given."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.sizes: list[int] = []
        self.written = asyncio.Event()

    async def write_evidence(self, batch: Sequence[EvidenceRow]) -> None:
        await self._store.write_evidence(batch)
        self.sizes.append(len(batch))
        self.written.set()


async def test_a_lone_row_is_written_at_once_and_rows_close_behind_it_share_a_batch(
    store: Store,
) -> None:
    """At a low rate no row waits out a window (that would cost a timer per row and batch
    nothing); rows that follow a written batch within the interval wait for it to pass."""
    database = _Batches(store)
    sink = EvidenceSink(database, flush_interval_s=1.0)
    sink.start()
    try:
        first, *close = rows(21)
        sink.add(first)
        started = time.monotonic()
        await asyncio.wait_for(database.written.wait(), 5)
        assert time.monotonic() - started < 0.5  # not the 1 s interval
        await asyncio.sleep(0.01)  # the writer's turn after the batch
        for row in close:
            sink.add(row)
            await asyncio.sleep(0.01)
        assert database.sizes == [1]  # the others wait for the interval to pass
        assert await sink.drain(within_s=5)
        assert database.sizes == [1, 20]
        assert len(await written_ids(store)) == 21
    finally:
        await sink.stop(drain_s=1)


class _Timed(_Batches):
    """Also when each row reached the database."""

    def __init__(self, store: Store, expected: int) -> None:
        super().__init__(store)
        self.landed: dict[str, float] = {}
        self.all_landed = asyncio.Event()
        self._expected = expected

    async def write_evidence(self, batch: Sequence[EvidenceRow]) -> None:
        await super().write_evidence(batch)
        now = time.monotonic()
        self.landed.update((row.request_id, now) for row in batch)
        if len(self.landed) >= self._expected:
            self.all_landed.set()


async def test_rows_at_a_steady_rate_share_batches_and_none_waits_past_twice_the_linger(
    store: Store,
) -> None:
    """20 rows a second with a 0.3 s linger: a few INSERTs instead of one per row (each one
    a round trip and a wake-up of the proxy), and every row written within twice the linger
    and the flush interval of its arrival (the last ones by the writer's own timer)."""
    database = _Timed(store, expected=24)
    sink = EvidenceSink(database, flush_interval_s=0.05, linger_s=0.3)
    sink.start()
    try:
        await asyncio.sleep(0.4)  # the first row finds the last batch a linger ago: alone
        added: dict[str, float] = {}
        for row in rows(24):
            sink.add(row)
            added[row.request_id] = time.monotonic()
            await asyncio.sleep(0.05)
        await asyncio.wait_for(database.all_landed.wait(), 5)
        assert len(database.sizes) <= 8, database.sizes  # 24 without the linger
        waited = max(database.landed[rid] - at for rid, at in added.items())
        assert waited <= 2 * 0.3 + 0.05 + 0.25, waited  # the bound, plus a loaded machine's
        assert len(await written_ids(store)) == 24
    finally:
        await sink.stop(drain_s=1)
