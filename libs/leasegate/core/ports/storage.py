"""What services need from durable storage. Implemented by leasegate.db on SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from leasegate.core.records import EvidenceRow, KeyRecord


class KeyReader(Protocol):
    async def get_key(self, key_id: str) -> KeyRecord | None:
        """The key's record, revoked or not; None when no such key was ever minted."""


class EvidenceWriter(Protocol):
    async def write_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        """Insert rows; a row whose request_id already exists is ignored (replays are safe)."""


class EvidenceReader(Protocol):
    async def query_evidence(
        self,
        *,
        decision_id: str | None = None,
        account_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[EvidenceRow]:
        """Newest first."""
