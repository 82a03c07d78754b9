"""Appending to the audit chain: the port the admin overlay writes through, and what it speaks.

`AuditChain` is `ChainReader` (`leasegate.audit.reads`) plus one `append`: the SQLAlchemy
`AuditRepository` (`leasegate.db.audit`) implements it over the database, the service tests'
`MemoryChain` (`tests/fixtures/memory_chain.py`) in memory. Like the readers' port it lives
here rather than in `leasegate.core`, because what it carries is the audit chain's own
(`AuditRecord`, `Anchor`), and `core` sits below this package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from leasegate.audit.chain import Anchor, AuditRecord
from leasegate.audit.reads import ChainReader, ChainSnapshot
from leasegate.core.records import KeyRecord


class ChainRaced(Exception):
    """Another writer appended the same sequence number first; nothing was written."""


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """What a verified mutation appends. `seal` is given how many keys were revoked."""

    revoke_account: str | None
    seal: Callable[[int], tuple[AuditRecord, Anchor]]


Prepare = Callable[[ChainSnapshot], AppendPlan]
"""Verifies the locked chain and checks the caller's revision; raises to abort."""


class AuditChain(ChainReader, Protocol):
    async def append(self, prepare: Prepare, now: datetime) -> tuple[AuditRecord, list[KeyRecord]]:
        """Lock, read, `prepare` (which may raise to abort), revoke the plan's account's live
        keys, append the sealed record and re-anchor: all or nothing. Raises ChainRaced when
        another writer appended the same sequence number first."""
        ...
