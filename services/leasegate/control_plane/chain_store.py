"""The audit chain's storage as the admin overlay uses it: a Protocol, so the overlay runs over
the database (`leasegate.db.audit.AuditRepository`) or, in the service tests, an in-memory twin
(`tests/fixtures/memory_chain.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from leasegate.audit import AuditRecord
from leasegate.audit.reads import ChainReader
from leasegate.core.records import KeyRecord
from leasegate.db.audit import Prepare


class AuditChain(ChainReader, Protocol):
    async def append(self, prepare: Prepare, now: datetime) -> tuple[AuditRecord, list[KeyRecord]]:
        """Lock, read, `prepare` (which may raise to abort), revoke the plan's account's live
        keys, append the sealed record and re-anchor: all or nothing. Raises ChainRaced when
        another writer appended the same sequence number first."""
