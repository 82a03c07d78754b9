"""Everything a production proxy asks of Postgres, over plain asyncpg: no SQLAlchemy is
imported, which keeps about 20-30 MB of resident memory out of every proxy process.

A proxy only reads keys (`KeyReader`), writes evidence batches (`EvidenceWriter`), reads the
audit chain's head and snapshot for the tenant budgets (`ChainReader`) and pings the database
for /readyz. Each is the same statement the SQLAlchemy `Store` and `AuditRepository` run on
Postgres (the key read and the evidence insert are shared outright:
`leasegate.pg.keys`, `leasegate.pg.evidence`), so both agree
(`tests/contract/test_proxy_store.py`). Errors leave as the core's `StoreError`s, by the one
rule of `leasegate.pg.errors`. The control plane and the embedded mode keep SQLAlchemy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg

from leasegate.audit.reads import ChainHead, ChainSnapshot
from leasegate.core.ports.calls import CallObserver
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.spend import AccountSpend
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.pg import evidence as evidence_pg
from leasegate.pg import keys as keys_pg
from leasegate.pg import spend_evidence as spend_evidence_pg
from leasegate.pg.pool import PG_POOL_SIZE, PING_TIMEOUT_S, Deadlines, PgPool
from leasegate.pg.rows import ANCHOR_COLUMNS, RECORD_COLUMNS, anchor_of_row, record_of_row
from leasegate.pg.url import connect_kwargs

# every name below is the schema's own: nothing here comes from input
_ANCHOR = f"SELECT {ANCHOR_COLUMNS} FROM audit_anchor LIMIT 1"  # noqa: S608
_RECORDS = f"SELECT {RECORD_COLUMNS} FROM audit_records ORDER BY seq"  # noqa: S608
_HEAD = (  # one statement sees one snapshot: no transaction needed
    "SELECT (SELECT count(*) FROM audit_records) AS records, "
    "(SELECT hash FROM audit_records ORDER BY seq DESC LIMIT 1) AS last_hash, "
    "EXISTS (SELECT 1 FROM audit_anchor) AS anchored, "
    'a."count", a.head_hash, a.signature '  # ANCHOR_COLUMNS, for anchor_of_row
    "FROM (SELECT 1) AS one LEFT JOIN LATERAL "
    "(SELECT * FROM audit_anchor LIMIT 1) AS a ON true"
)


class PgProxyStore:
    """The proxy's database: `KeyReader`, `EvidenceWriter` and `ChainReader` on one pool."""

    dialect = "postgresql"

    def __init__(self, pool: PgPool) -> None:
        self.pool = pool

    @classmethod
    def connect(
        cls,
        url: str,
        deadlines: Deadlines | None = None,
        pool_size: int = PG_POOL_SIZE,
    ) -> PgProxyStore:
        """Without connecting: the first call does. The deadlines are `Database.pg`'s."""
        limits = deadlines or Deadlines()
        pool = PgPool(
            connect_kwargs(url),
            size=pool_size,
            connect_s=limits.connect_s,
            command_s=limits.command_s,
        )
        return cls(pool)

    async def get_key(self, key_id: str) -> KeyRecord | None:
        return await keys_pg.get_key(self.pool, key_id)

    async def write_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        await evidence_pg.write_rows(self.pool, rows)

    async def spend_evidence(
        self, *, tenant: str | None, chain_id: str | None, since: datetime, until: datetime
    ) -> Sequence[AccountSpend]:
        return await spend_evidence_pg.spend_evidence(
            self.pool, tenant=tenant, chain_id=chain_id, since=since, until=until
        )

    async def read_chain(self) -> ChainSnapshot:
        async with self._snapshot() as connection:
            anchor = await connection.fetchrow(_ANCHOR)
            rows = await connection.fetch(_RECORDS)
        return ChainSnapshot(tuple(map(record_of_row, rows)), anchor_of_row(anchor))

    async def read_head(self) -> ChainHead:
        """Asked every 0.5 s while requests arrive (proxy/tenant_budgets.py): one statement,
        so a paced proxy pays one round trip for it, not a transaction's four."""
        async with self.pool.connection() as connection:
            head = await connection.fetchrow(_HEAD)
        # aggregates: always exactly one row
        anchor = anchor_of_row(head) if head["anchored"] else None
        return ChainHead(head["records"], head["last_hash"], anchor)

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[asyncpg.Connection]:
        """One REPEATABLE READ transaction, as `AuditRepository`'s reads: a chain and its
        anchor are never seen from two different moments."""
        async with (
            self.pool.connection() as connection,
            connection.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield connection

    async def ping(self) -> bool:
        """Whether the database answers a trivial query within a couple of seconds."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S), self.pool.connection() as connection:
                await connection.fetchval("SELECT 1")
        except (StoreError, TimeoutError):
            return False
        return True

    async def schema_revisions(self) -> frozenset[str]:
        """The revisions in `alembic_version`; none when the table does not exist."""
        async with self.pool.connection() as connection:
            if not await connection.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL"):
                return frozenset()
            rows = await connection.fetch("SELECT version_num FROM alembic_version")
        return frozenset(str(row[0]) for row in rows)

    def observe(self, calls: CallObserver) -> None:
        """Time every call from now on (the store metrics)."""
        self.pool.calls = calls

    async def close(self) -> None:
        await self.pool.close()
