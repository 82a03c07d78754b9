"""How a proxy learns tenant budgets: from the audit chain in the database, within a second
of a change, and without making requests wait on a database that does not answer."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import pytest

from leasegate.audit import BudgetFields
from leasegate.control_plane.overlay import AdminOverlay, BudgetChange
from leasegate.core.clock import SystemClock
from leasegate.db import Database
from leasegate.db.audit import AuditRepository
from leasegate.kv.witness_memory import InProcessAuditWitness
from leasegate.proxy.tenant_budgets import FRESH_S, REFRESH_S, TenantBudgetWatch
from leasegate.spend import TenantBudget
from tests.fixtures.databases import migrate


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    url = f"sqlite+aiosqlite:///{tmp_path}/lg.db"
    await asyncio.to_thread(migrate, url)
    database = Database.connect(url)
    try:
        yield database
    finally:
        await database.dispose()


def change(budget: BudgetFields, revision: int) -> BudgetChange:
    return BudgetChange(
        budget=budget,
        expected_revision=revision,
        reason="test",
        actor="ops-alice",
        on_behalf_of=None,
    )


async def test_a_budget_change_reaches_the_proxy_within_the_refresh_age(db: Database) -> None:
    overlay = AdminOverlay(AuditRepository(db), InProcessAuditWitness(), None, SystemClock())
    watch = TenantBudgetWatch(AuditRepository(db), None, SystemClock())
    assert await watch.budgets() == {}

    await overlay.mutate(change(BudgetFields("acme/web", "day", 100, "1.5"), 0))
    await asyncio.sleep(REFRESH_S)
    assert await watch.budgets() == {"acme/web": TenantBudget("day", 100, Decimal("1.5"))}

    await overlay.mutate(change(BudgetFields("acme/web"), 1))
    await asyncio.sleep(REFRESH_S)
    assert await watch.budgets() == {}


async def test_an_unanswering_database_does_not_hold_requests_after_the_first_failure() -> None:
    # a socket that accepts and never answers: every read waits for its deadline
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    port = silent.getsockname()[1]
    db = Database.connect(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/none")
    try:
        watch = TenantBudgetWatch(AuditRepository(db), None, SystemClock())
        assert await watch.budgets() == {}  # the first read waited and failed
        await asyncio.sleep(FRESH_S)
        assert await watch.budgets() == {}  # answered at once: the next read runs behind it
        pending = watch._pending
        assert pending is not None
        assert not pending.done()
        pending.cancel()
    finally:
        await db.dispose()
        silent.close()
