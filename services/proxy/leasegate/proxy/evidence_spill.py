"""The evidence spill: rows the database cannot take yet, on local disk, replayed in order.

Layout: `LEASEGATE_EVIDENCE_SPILL_PATH/<database>/spill-<created ns>-<pid>-<random>.jsonl`, where
`<database>` is a hash of the database URL, so rows are only ever replayed into the database
they were meant for. Each process appends to a file of its own (one JSON line per row) and
holds an exclusive `flock` on it while it lives. At start-up a process adopts every file of
its database that nobody holds (a predecessor that stopped or crashed) and replays it first.

Appends are `write(2)` calls; `sync()` fsyncs them in batches (the writer calls it every flush
interval, and at shutdown). A file is consumed from a read offset; once consumed to its end an
adopted file is deleted and the process's own file truncated; at a clean close a partly
replayed file is cut down to its unreplayed rows. A row already written before a crash is
replayed again: the insert ignores an existing request id, so it lands exactly once.

If the disk refuses an append (full, read-only), the partial line is cut off again, the
failure is logged and counted, and the caller keeps the row in memory instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import secrets
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from leasegate.core.records import EvidenceRow

log = logging.getLogger("leasegate.evidence")


def encode_row(row: EvidenceRow) -> bytes:
    values: dict[str, Any] = asdict(row)
    values["started_at"] = row.started_at.isoformat()
    values["cost"] = None if row.cost is None else str(row.cost)  # a decimal, never a float
    return json.dumps(values, separators=(",", ":")).encode() + b"\n"


def decode_row(line: bytes) -> EvidenceRow:
    values = json.loads(line)
    values["started_at"] = datetime.fromisoformat(values["started_at"])
    cost = values.get("cost")
    values["cost"] = None if cost is None else Decimal(cost)
    return EvidenceRow(**values)


def database_namespace(database_url: str) -> str:
    return hashlib.sha256(database_url.encode()).hexdigest()[:16]


@dataclass
class _Segment:
    path: Path
    fd: int
    read_offset: int = 0
    size: int = 0
    rows: int = 0
    """Rows between read_offset and size."""
    own: bool = False
    peeked_end: int | None = None
    peeked_rows: int = 0


class SpillFile:
    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._segments: list[_Segment] = []
        self._own: _Segment | None = None
        self._dirty = False

    @classmethod
    def open(cls, root: Path, database_url: str) -> SpillFile:
        spill = cls(root / database_namespace(database_url))
        spill._directory.mkdir(parents=True, exist_ok=True)
        spill._adopt_orphans()
        # the creation time first: adopted files are replayed oldest first
        name = f"spill-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        fd = os.open(spill._directory / name, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        spill._own = _Segment(spill._directory / name, fd, own=True)
        spill._segments.append(spill._own)
        return spill

    def _adopt_orphans(self) -> None:
        for path in sorted(self._directory.glob("spill-*.jsonl")):
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # another process adopted and finished it meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not _still_at(path, fd):
                    raise BlockingIOError  # its owner compacted it meanwhile: a stale copy
            except OSError:
                os.close(fd)  # a live process's own file
                continue
            size = os.fstat(fd).st_size
            rows = _count_lines(fd, size)
            self._segments.append(_Segment(path, fd, size=size, rows=rows))
            if rows:
                log.warning(
                    "evidence spill file of a previous process adopted for replay",
                    extra={"rows": rows},
                )

    @property
    def own_fd(self) -> int:
        """The descriptor this process appends to (-1 once closed)."""
        return self._own.fd if self._own is not None else -1

    @property
    def pending(self) -> int:
        return sum(segment.rows for segment in self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size - segment.read_offset for segment in self._segments)

    def append(self, row: EvidenceRow) -> bool:
        """Append one row (not yet fsynced); False if the disk refused it."""
        own = self._own
        if own is None:
            return False
        line = encode_row(row)
        try:
            written = os.write(own.fd, line)
            if written != len(line):
                raise OSError("short write to the evidence spill file")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(own.fd, own.size)  # no torn line for the next append to join
            log.error("evidence spill write failed", extra={"error": type(exc).__name__})
            return False
        own.size += written
        own.rows += 1
        self._dirty = True
        return True

    def sync(self) -> None:
        if self._own is not None and self._dirty:
            self._dirty = False
            os.fsync(self._own.fd)

    async def sync_async(self) -> None:
        if self._own is not None and self._dirty:
            self._dirty = False
            await asyncio.to_thread(os.fsync, self._own.fd)

    def peek(self, limit: int) -> list[EvidenceRow]:
        """Up to `limit` of the oldest unreplayed rows, from one file. An unreadable line (a
        torn tail after a crash) is skipped and logged. Call `consume()` once they are in the
        database."""
        segment = next((s for s in self._segments if s.rows), None)
        if segment is None:
            return []
        rows: list[EvidenceRow] = []
        offset = segment.read_offset
        data = os.pread(segment.fd, min(segment.size - offset, limit * 8192), offset)
        lines = data.splitlines(keepends=True)[:limit]
        complete = [line for line in lines if line.endswith(b"\n")]
        if not complete:
            # a torn or oversized line: skip the rest of the file rather than stall
            log.error("unreadable tail of an evidence spill file skipped")
            segment.rows, segment.peeked_end = 0, segment.size
            return []
        for line in complete:
            offset += len(line)
            try:
                rows.append(decode_row(line))
            except (ValueError, TypeError, KeyError):
                log.error("unreadable line in an evidence spill file skipped")
        segment.peeked_end = offset
        segment.peeked_rows = len(complete)
        return rows

    def consume(self) -> None:
        """Forget the rows of the last `peek`: they are in the database."""
        segment = next((s for s in self._segments if s.peeked_end is not None), None)
        if segment is None or segment.peeked_end is None:
            return
        segment.read_offset, segment.peeked_end = segment.peeked_end, None
        segment.rows = max(0, segment.rows - segment.peeked_rows)
        segment.peeked_rows = 0
        if segment.rows == 0 and segment.read_offset >= segment.size:
            self._retire(segment)

    def _retire(self, segment: _Segment) -> None:
        if segment.own:
            os.ftruncate(segment.fd, 0)
            segment.read_offset = segment.size = segment.rows = 0
            return
        segment.path.unlink(missing_ok=True)
        os.close(segment.fd)  # releases the lock
        self._segments.remove(segment)

    def close(self) -> None:
        """Release every file. A file with nothing left is removed; one partly replayed keeps
        only its unreplayed rows, so the next process does not replay the rest again."""
        self.sync()
        for segment in list(self._segments):
            if segment.rows == 0:
                segment.path.unlink(missing_ok=True)
            elif segment.read_offset > 0:
                self._compact(segment)
            os.close(segment.fd)
        self._segments.clear()
        self._own = None

    def _compact(self, segment: _Segment) -> None:
        """Replace the file by its unreplayed tail (written aside, fsynced, renamed over)."""
        aside = segment.path.with_suffix(".compacting")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            offset = segment.read_offset
            while offset < segment.size:
                chunk = os.pread(segment.fd, min(1 << 20, segment.size - offset), offset)
                os.write(fd, chunk)
                offset += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(aside, segment.path)


def open_spill(root: Path | None, database_url: str) -> SpillFile | None:
    """The spill file under `root` (none without one). A directory that cannot be created or
    written is not fatal: one warning names it, and rows the database cannot take wait in
    memory instead (up to `LEASEGATE_EVIDENCE_MEMORY_ROWS`, then the oldest are dropped)."""
    if root is None:
        return None
    try:
        return SpillFile.open(root, database_url)
    except OSError as exc:
        log.warning(
            "evidence spill directory not writable: during a database outage evidence rows "
            "wait in memory only, and are lost if the process dies",
            extra={"path": str(root.absolute()), "error": type(exc).__name__},
        )
        return None


def _still_at(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _count_lines(fd: int, size: int) -> int:
    count, offset = 0, 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 20, size - offset), offset)
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count
