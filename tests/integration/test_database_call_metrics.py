"""Database calls as `leasegate_store_call_seconds{store="postgresql"}` and
`leasegate_store_errors_total{store="postgresql"}`: the asyncpg pool's calls (a proxy's key
reads, evidence batches and chain reads; the control plane's mints and key reads) are timed as
SQLAlchemy's statements are, one per lent connection, and a failed call is counted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from leasegate.db import Store
from leasegate.db.proxy_sql import SqlProxyStore
from leasegate.pg.proxy_store import PgProxyStore
from leasegate.web.store_metrics import StoreMetrics
from tests.fixtures.databases import migrated_database, pg_url
from tests.fixtures.evidence import evidence_row
from tests.fixtures.services import require_postgres
from tests.fixtures.storage import T0, minted

pytestmark = pytest.mark.postgres


@pytest.fixture
async def url() -> AsyncIterator[str]:
    require_postgres()
    async with migrated_database() as name:
        yield pg_url(name)


def _counts(registry: CollectorRegistry) -> tuple[float, float]:
    labels = {"store": "postgresql"}
    calls = registry.get_sample_value("leasegate_store_call_seconds_count", labels)
    errors = registry.get_sample_value("leasegate_store_errors_total", labels)
    return calls or 0.0, errors or 0.0


async def test_a_proxys_asyncpg_calls_are_timed(url: str) -> None:
    registry = CollectorRegistry()
    proxy = PgProxyStore.connect(url)
    StoreMetrics(registry).watch_database(proxy)
    try:
        assert await proxy.get_key("k-nobody-minted") is None
        await proxy.write_evidence([evidence_row("r1", T0)])
        await proxy.read_head()
        assert _counts(registry) == (3, 0)
        assert registry.get_sample_value(
            "leasegate_store_call_seconds_sum", {"store": "postgresql"}
        )
    finally:
        await proxy.close()


async def test_the_control_planes_asyncpg_and_sqlalchemy_calls_share_one_series(url: str) -> None:
    registry = CollectorRegistry()
    store = Store.connect(url)
    StoreMetrics(registry).watch_database(SqlProxyStore(store))
    decision, key = minted()
    try:
        await store.commit_mint(decision, key, lease_capacity=None, now=T0)  # asyncpg
        assert await store.get_key(key.key_id) == key  # asyncpg
        assert _counts(registry) == (2, 0)
        await store.query_evidence(limit=1)  # SQLAlchemy
        calls, errors = _counts(registry)
        assert calls > 2
        assert errors == 0
    finally:
        await store.close()


async def test_a_call_that_fails_is_counted() -> None:
    registry = CollectorRegistry()
    proxy = PgProxyStore.connect("postgresql+asyncpg://postgres@127.0.0.1:1/leasegate")
    StoreMetrics(registry).watch_database(proxy)
    try:
        assert await proxy.ping() is False
        assert _counts(registry) == (0, 1)
    finally:
        await proxy.close()
