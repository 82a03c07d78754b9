"""Reading the audit chain: what a read returns and the port readers depend on.

The tenant budgets of every proxy replica (`leasegate.proxy.tenant_budgets`) and the control
plane's overlay read the chain through `ChainReader`, never through a concrete store: the
SQLAlchemy `AuditRepository` (`leasegate.db.audit`) and the proxy's asyncpg store
(`leasegate.pg.proxy_store`) both implement it, with the same consistent-snapshot semantics
(`tests/contract/test_proxy_store.py`). The port lives here rather than in `leasegate.core`
because its records are the audit chain's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from leasegate.audit.chain import Anchor, AuditRecord


@dataclass(frozen=True, slots=True)
class ChainSnapshot:
    records: tuple[AuditRecord, ...]
    anchor: Anchor | None


@dataclass(frozen=True, slots=True)
class ChainHead:
    """A cheap fingerprint of the chain, for caching a fold: any append, deleted record,
    replaced last record or touched anchor changes it."""

    count: int
    last_hash: str | None
    anchor: Anchor | None


class ChainReader(Protocol):
    async def read_chain(self) -> ChainSnapshot:
        """The records (by `seq`) and the anchor, from one consistent moment."""

    async def read_head(self) -> ChainHead:
        """The chain's fingerprint, from one consistent moment (one short transaction)."""
