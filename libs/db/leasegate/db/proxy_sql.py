"""What a proxy asks of the database, over SQLAlchemy: the embedded mode's (SQLite, one
process with the control plane) and a proxy on a non-Postgres URL. A production proxy on
Postgres uses `leasegate.pg.proxy_store` instead, which imports no SQLAlchemy; both keep one
contract (`tests/contract/test_proxy_store.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from leasegate.audit.reads import ChainHead, ChainSnapshot
from leasegate.core.ports.calls import CallObserver
from leasegate.core.ports.spend import AccountSpend
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.db.audit import AuditRepository
from leasegate.db.store import Store


class SqlProxyStore:
    """`KeyReader`, `EvidenceWriter` and `ChainReader` over a `Store` and its database."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._chain = AuditRepository(store.db)
        self.dialect = store.db.dialect

    async def get_key(self, key_id: str) -> KeyRecord | None:
        return await self._store.get_key(key_id)

    async def write_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        await self._store.write_evidence(rows)

    async def spend_evidence(
        self, *, tenant: str | None, chain_id: str | None, since: datetime, until: datetime
    ) -> Sequence[AccountSpend]:
        return await self._store.spend_evidence(
            tenant=tenant, chain_id=chain_id, since=since, until=until
        )

    async def read_chain(self) -> ChainSnapshot:
        return await self._chain.read_chain()

    async def read_head(self) -> ChainHead:
        return await self._chain.read_head()

    async def ping(self) -> bool:
        return await self._store.db.ping()

    async def schema_revisions(self) -> frozenset[str]:
        return await self._store.db.schema_revisions()

    def observe(self, calls: CallObserver) -> None:
        self._store.db.observe(calls)

    async def close(self) -> None:
        await self._store.close()
