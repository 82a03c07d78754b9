"""What a proxy asks of the database (`ProxyDatabase`), one suite for each implementation: the
SQLAlchemy one (`SqlProxyStore` over `Store` and `AuditRepository`, on SQLite and Postgres)
and the asyncpg one a production proxy runs on Postgres without SQLAlchemy (`PgProxyStore`).
Each answer is also checked against the ORM `Store`/`AuditRepository` reading the same
database, so the two paths cannot drift apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest

from leasegate.audit import Anchor, AuditRecord, BudgetFields, Entry, anchor_for, link
from leasegate.audit.appends import AppendPlan
from leasegate.audit.reads import ChainSnapshot
from leasegate.core.ports.errors import StoreRejected, StoreUnavailable
from leasegate.core.records import EvidenceRow
from leasegate.db import Store
from leasegate.db.audit import AuditRepository
from leasegate.db.proxy_sql import SqlProxyStore
from leasegate.pg.proxy_store import PgProxyStore
from leasegate.schema import release_migrations
from leasegate.web.wiring import ProxyDatabase
from tests.fixtures.databases import migrate, migrated_database, pg_url
from tests.fixtures.evidence import evidence_row
from tests.fixtures.services import require_postgres
from tests.fixtures.storage import BOTH_DATABASES, T0, minted

KEY = b"audit-key"


@dataclass
class Opened:
    proxy: ProxyDatabase
    store: Store
    """The ORM store on the same database: the reference the proxy's answers must match."""


@pytest.fixture(params=BOTH_DATABASES)
async def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database at `alembic head` of this test's own (the audit chain cannot be emptied)."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'leasegate.db'}"
        await asyncio.to_thread(migrate, url)  # Alembic runs its own event loop
        yield url
        return
    require_postgres()
    async with migrated_database() as name:
        yield pg_url(name)


@pytest.fixture(params=["sqlalchemy", "asyncpg"])
async def opened(request: pytest.FixtureRequest, fresh_url: str) -> AsyncIterator[Opened]:
    if request.param == "asyncpg" and not fresh_url.startswith("postgresql"):
        pytest.skip("the asyncpg store is Postgres only")
    store = Store.connect(fresh_url)
    proxy: ProxyDatabase
    proxy = (
        SqlProxyStore(store) if request.param == "sqlalchemy" else PgProxyStore.connect(fresh_url)
    )
    try:
        yield Opened(proxy, store)
    finally:
        await proxy.close()
        await store.close()


async def test_a_key_reads_as_the_store_minted_it_and_a_missing_one_is_none(
    opened: Opened,
) -> None:
    decision, key = minted()
    await opened.store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await opened.proxy.get_key(key.key_id) == key
    assert await opened.proxy.get_key(key.key_id) == await opened.store.get_key(key.key_id)
    assert await opened.proxy.get_key("k-nobody-minted") is None


async def test_evidence_is_written_once_however_often_it_is_replayed(opened: Opened) -> None:
    rows = [evidence_row(f"r-{i}", T0 + timedelta(milliseconds=i)) for i in range(3)]
    await opened.proxy.write_evidence(rows)
    await opened.proxy.write_evidence(rows)  # a replay (a spill file, a retried batch)
    await opened.proxy.write_evidence([])
    written = await opened.store.query_evidence(limit=10)
    assert sorted(written, key=lambda r: r.request_id) == rows


async def test_a_row_the_database_refuses_is_store_rejected_and_writes_nothing(
    opened: Opened,
) -> None:
    bad = replace(evidence_row("bad", T0), requested_model="gpt-x\ud800")
    good = evidence_row("good", T0)
    with pytest.raises(StoreRejected):
        await opened.proxy.write_evidence([good, bad])
    assert await opened.store.query_evidence(limit=10) == []
    await opened.proxy.write_evidence([good])  # the connection is still good
    assert [r.request_id for r in await opened.store.query_evidence(limit=10)] == ["good"]


async def test_the_schema_reads_at_this_releases_head(opened: Opened) -> None:
    head = release_migrations()[-1].revision
    assert await opened.proxy.schema_revisions() == {head}
    assert await opened.store.db.schema_revisions() == {head}


async def test_an_empty_chain_reads_as_empty(opened: Opened) -> None:
    reference = AuditRepository(opened.store.db)
    assert await opened.proxy.read_chain() == ChainSnapshot((), None)
    head = await opened.proxy.read_head()
    assert (head.count, head.last_hash, head.anchor) == (0, None, None)
    assert head == await reference.read_head()


async def test_the_chain_reads_as_the_audit_repository_appended_it(opened: Opened) -> None:
    reference = AuditRepository(opened.store.db)
    await _append(reference, _entry(account_id="openai-main", state="disabled"))
    budget = BudgetFields("acme/web", period="day", max_tokens=1000, max_cost="2.50")
    await _append(reference, _entry(kind="tenant-budget", budget=budget))
    snapshot = await opened.proxy.read_chain()
    assert snapshot == await reference.read_chain()
    assert [r.seq for r in snapshot.records] == [1, 2]
    assert snapshot.anchor == anchor_for(2, snapshot.records[-1].hash, KEY)
    head = await opened.proxy.read_head()
    assert head == await reference.read_head()
    assert (head.count, head.last_hash) == (2, snapshot.records[-1].hash)


def _entry(**fields: object) -> Entry:
    base = Entry(T0, "ops", "admin-token", "alice", "", "enabled", "test")
    return replace(base, **fields)  # type: ignore[arg-type]


async def _append(chain: AuditRepository, asked: Entry) -> None:
    def prepare(snapshot: ChainSnapshot) -> AppendPlan:
        seq = len(snapshot.records) + 1
        prev = snapshot.records[-1].hash if snapshot.records else "0" * 64

        def seal(revoked: int) -> tuple[AuditRecord, Anchor]:
            record = link(asked, seq=seq, prev_hash=prev, revoked_keys=revoked)
            return record, anchor_for(seq, record.hash, KEY)

        return AppendPlan(None, seal)

    await chain.append(prepare, T0)


async def test_every_call_of_an_unreachable_postgres_is_store_unavailable() -> None:
    proxy = PgProxyStore.connect("postgresql+asyncpg://postgres@127.0.0.1:1/leasegate")
    rows: list[EvidenceRow] = [evidence_row("r1", T0)]
    try:
        for call in (
            lambda: proxy.get_key("k1"),
            lambda: proxy.write_evidence(rows),
            proxy.read_head,
            proxy.read_chain,
            proxy.schema_revisions,
        ):
            with pytest.raises(StoreUnavailable):
                await call()
        assert await proxy.ping() is False
    finally:
        await proxy.close()


async def test_spend_evidence_sums_a_tenants_rows_and_a_chains_rows(opened: Opened) -> None:
    """What a lost running total is rebuilt from: per account, the ORM's answer too."""
    root, root_key = minted("acme/web", at=T0)
    root = replace(root, chain_id=root.id)
    hop, hop_key = minted("acme/web", at=T0 + timedelta(seconds=1), chain_id=root.id)
    other, other_key = minted("acme/api", at=T0)
    for decision, key in ((root, root_key), (hop, hop_key), (other, other_key)):
        await opened.store.commit_mint(decision, key, lease_capacity=None, now=T0)
    rows = [
        replace(evidence_row("r-1", T0 + timedelta(seconds=2)), mint_decision_id=root.id),
        replace(evidence_row("r-2", T0 + timedelta(seconds=3)), mint_decision_id=hop.id),
        replace(evidence_row("r-3", T0 + timedelta(seconds=9)), mint_decision_id=hop.id),
        replace(evidence_row("r-4", T0 + timedelta(seconds=2)), mint_decision_id=other.id),
    ]
    await opened.proxy.write_evidence(rows)
    until = T0 + timedelta(seconds=5)  # r-3 started after the cut-off
    for scope in ({"tenant": "acme/web", "chain_id": None}, {"tenant": None, "chain_id": root.id}):
        found = await opened.proxy.spend_evidence(**scope, since=T0, until=until)
        assert [(g.account_id, g.input_tokens, g.output_tokens) for g in found] == [
            ("openai-main", 2, 4)
        ]
        assert found == await opened.store.spend_evidence(**scope, since=T0, until=until)
    assert (
        await opened.proxy.spend_evidence(
            tenant="acme/nobody", chain_id=None, since=T0, until=until
        )
        == []
    )
