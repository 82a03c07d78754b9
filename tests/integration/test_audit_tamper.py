"""The audit chain on real Postgres with its witness in real Redis: the database refuses to
change history, and every deliberate tamper by the database's owner reads `corrupt`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from decimal import Decimal

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from leasegate.audit import BudgetFields, rehashed
from leasegate.control_plane.overlay import AdminOverlay, BudgetChange, StateChange
from leasegate.core.clock import SystemClock
from leasegate.core.errors import GatewayError
from leasegate.db import Database
from leasegate.db.audit import AuditRepository
from leasegate.kv.keys import witness_key
from leasegate.kv.witness_redis import RedisAuditWitness
from leasegate.proxy.tenant_budgets import TenantBudgetWatch
from leasegate.spend import TenantBudget

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

AUDIT_KEY = SecretStr("test-audit-key")


class Chain:
    """An overlay on a migrated Postgres database, and the owner's tampering tools."""

    def __init__(self, db: Database, witness: RedisAuditWitness) -> None:
        self.db = db
        self.witness = witness

    def overlay(self) -> AdminOverlay:
        """A fresh reader, as another control-plane process would be (no cache)."""
        return AdminOverlay(AuditRepository(self.db), self.witness, AUDIT_KEY, SystemClock())

    async def change(
        self, account: str, state: str, revision: int, overlay: AdminOverlay | None = None
    ) -> None:
        await (overlay or self.overlay()).mutate(
            StateChange(
                account_id=account,
                state=state,
                expected_revision=revision,
                reason=f"set {state}",
                actor="ops-alice",
                on_behalf_of=None,
            )
        )

    async def owner(self, *statements: str, **params: object) -> None:
        """What the database owner can do: switch the append-only triggers off, act, and on."""
        async with self.db.engine.begin() as connection:
            await connection.execute(text("ALTER TABLE audit_records DISABLE TRIGGER USER"))
            for statement in statements:
                await connection.execute(text(statement), params)
            await connection.execute(text("ALTER TABLE audit_records ENABLE TRIGGER USER"))


@pytest.fixture
async def chain(
    migrated_pg_database: str, redis_url: str, redis_prefix: str
) -> AsyncIterator[Chain]:
    db = Database.connect(migrated_pg_database)
    client = aioredis.from_url(redis_url)
    built = Chain(db, RedisAuditWitness(client, redis_prefix))
    for revision, (account, state) in enumerate(
        [("acct-a", "disabled"), ("acct-b", "draining"), ("acct-a", "enabled")]
    ):
        await built.change(account, state, revision)
    try:
        yield built
    finally:
        await client.aclose()
        await db.dispose()


async def test_the_chain_verifies_and_folds(chain: Chain) -> None:
    verdict, snapshot = await chain.overlay().read_full()
    assert (verdict.status, verdict.revision) == ("ok", 3)
    assert verdict.overlay == {"acct-a": "enabled", "acct-b": "draining"}
    assert [r.actor for r in snapshot.records] == ["ops-alice"] * 3
    witness = await chain.witness.read()
    assert witness is not None
    assert (witness.revision, witness.head_hash) == (3, snapshot.records[-1].hash)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_records SET state = 'enabled' WHERE seq = 1",
        "DELETE FROM audit_records WHERE seq = 3",
        "TRUNCATE audit_records",
    ],
)
async def test_the_database_refuses_to_change_history(chain: Chain, statement: str) -> None:
    with pytest.raises(DBAPIError, match="append-only"):
        async with chain.db.engine.begin() as connection:
            await connection.execute(text(statement))
    verdict, _ = await chain.overlay().read_full()
    assert (verdict.status, verdict.revision) == ("ok", 3)


async def _delete_last(chain: Chain) -> None:
    await chain.owner("DELETE FROM audit_records WHERE seq = 3")


async def _delete_middle(chain: Chain) -> None:
    await chain.owner("DELETE FROM audit_records WHERE seq = 2")


async def _edit_field(chain: Chain) -> None:
    await chain.owner("UPDATE audit_records SET state = 'enabled' WHERE seq = 2")


async def _rehash_without_key(chain: Chain) -> None:
    """Rewrite record 2, re-link record 3 to it and move the anchor's head: all a forger can
    do without the audit key (the old signature stays, and no longer matches)."""
    _, snapshot = await chain.overlay().read_full()
    second = rehashed(replace(snapshot.records[1], state="enabled"))
    third = rehashed(replace(snapshot.records[2], prev_hash=second.hash))
    await chain.owner(
        "UPDATE audit_records SET state = :state, hash = :second WHERE seq = 2",
        "UPDATE audit_records SET prev_hash = :second, hash = :third WHERE seq = 3",
        "UPDATE audit_anchor SET head_hash = :third",
        state="enabled",
        second=second.hash,
        third=third.hash,
    )


async def _truncate(chain: Chain) -> None:
    await chain.owner("TRUNCATE audit_records")


async def _remove_anchor(chain: Chain) -> None:
    await chain.owner("DELETE FROM audit_anchor")


async def _empty_everything(chain: Chain) -> None:
    await chain.owner("TRUNCATE audit_records", "DELETE FROM audit_anchor")


async def _rollback_behind_witness(chain: Chain) -> None:
    """Keep a copy of revision 3's signed anchor, append a 4th record (the one an attacker
    wants gone), then delete it and restore the older anchor: coherent, signed, and stale."""
    async with chain.db.engine.connect() as connection:
        saved = (await connection.execute(text("SELECT * FROM audit_anchor"))).one()._mapping
    await chain.change("acct-b", "disabled", 3)
    await chain.owner(
        "DELETE FROM audit_records WHERE seq = 4",
        "UPDATE audit_anchor SET count = :count, head_hash = :head, signature = :sig",
        count=saved["count"],
        head=saved["head_hash"],
        sig=saved["signature"],
    )


Tamper = Callable[[Chain], Awaitable[None]]

# (tamper, problem, first_bad_seq, whether the chain's head or the witness moved: only then
# does a reader's cache miss at once; an in-place edit waits for the next full fold)
TAMPERS: list[tuple[Tamper, str, int, bool]] = [
    (_delete_last, "truncated", 3, True),
    (_delete_middle, "sequence-gap", 2, True),
    (_edit_field, "hash-mismatch", 2, False),
    (_rehash_without_key, "anchor-signature-invalid", 1, True),
    (_truncate, "truncated", 1, True),
    (_remove_anchor, "anchor-missing", 1, True),
    (_empty_everything, "behind-witness", 1, True),
    (_rollback_behind_witness, "behind-witness", 4, True),
]


@pytest.mark.parametrize(
    ("tamper", "problem", "first_bad_seq", "head_moved"),
    TAMPERS,
    ids=[t[0].__name__[1:] for t in TAMPERS],
)
async def test_tampering_reads_corrupt_and_refuses_mutations(
    chain: Chain, tamper: Tamper, problem: str, first_bad_seq: int, head_moved: bool
) -> None:
    reader = chain.overlay()
    assert (await reader.verdict()).status == "ok"  # cached before the tamper

    await tamper(chain)

    verdict, _ = await chain.overlay().read_full()
    assert (verdict.status, verdict.problem, verdict.first_bad_seq) == (
        "corrupt",
        problem,
        first_bad_seq,
    )
    assert verdict.overlay == {}
    if head_moved:
        assert (await reader.verdict()).status == "corrupt"  # the cache does not hide it
    # a mutation never trusts the cache: it re-reads and re-verifies under the lock
    with pytest.raises(GatewayError) as refused:
        await chain.change("acct-a", "enabled", verdict.revision, reader)
    assert refused.value.code == "audit-chain-corrupt"
    assert refused.value.status == 503


async def test_a_tampered_tenant_budget_reads_corrupt_and_proxies_keep_the_verified_one(
    chain: Chain,
) -> None:
    overlay = chain.overlay()
    await overlay.mutate(
        BudgetChange(
            budget=BudgetFields("acme", "day", 1000, "2.50"),
            expected_revision=3,
            reason="cap acme",
            actor="ops-alice",
            on_behalf_of=None,
        )
    )
    watch = TenantBudgetWatch(AuditRepository(chain.db), AUDIT_KEY, SystemClock())
    assert await watch.budgets() == {"acme": TenantBudget("day", 1000, Decimal("2.50"))}

    await chain.owner("UPDATE audit_records SET max_cost = '250000' WHERE seq = 4")

    verdict, _ = await chain.overlay().read_full()
    assert (verdict.status, verdict.problem, verdict.first_bad_seq) == (
        "corrupt",
        "hash-mismatch",
        4,
    )
    assert verdict.budgets == {}
    fresh = TenantBudgetWatch(AuditRepository(chain.db), AUDIT_KEY, SystemClock())
    for tenant in ("acme", "never-budgeted"):  # nothing verified: no tenant can be cleared
        with pytest.raises(GatewayError) as unverifiable:
            await fresh.budget_of(tenant)
        assert (unverifiable.value.code, unverifiable.value.status) == ("budgets-unverifiable", 503)
    assert await watch.budget_of("never-budgeted") is None  # verified before: cleared
    await asyncio.sleep(1.05)  # past the watch's refresh age: it reads the tampered chain
    assert await watch.budgets() == {"acme": TenantBudget("day", 1000, Decimal("2.50"))}
    with pytest.raises(GatewayError) as refused:
        await overlay.mutate(
            BudgetChange(
                budget=BudgetFields("acme"),
                expected_revision=4,
                reason="clear",
                actor="ops-alice",
                on_behalf_of=None,
            )
        )
    assert refused.value.code == "audit-chain-corrupt"


async def test_a_proxy_reading_a_restored_backup_refuses_until_the_chain_verifies(
    chain: Chain, redis_url: str, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rollback (the last record gone, an older signed anchor restored) verifies by itself;
    only the witness in Redis shows it. A proxy reads the witness too, and says why once."""
    await _rollback_behind_witness(chain)
    watch = TenantBudgetWatch(AuditRepository(chain.db), AUDIT_KEY, SystemClock(), chain.witness)
    for _ in range(3):  # three reads of the same chain, many requests
        for _ in range(5):
            with pytest.raises(GatewayError) as unverifiable:
                await watch.budget_of("acme")
        await asyncio.sleep(0.55)
    assert unverifiable.value.code == "budgets-unverifiable"
    assert unverifiable.value.retry_after_s == 1.0
    said = [r for r in caplog.records if r.name == "leasegate.proxy"]
    assert [r.getMessage() for r in said] == [
        "tenant budgets unverifiable: refusing every tenant until the chain verifies"
    ]
    assert said[0].chain == "corrupt: behind-witness at seq 4"  # type: ignore[attr-defined]

    # the operator accepts the restore (docs/operations.md: the witness is reset), and the
    # proxy serves again by itself, without a restart
    client = aioredis.from_url(redis_url)
    try:
        await client.delete(witness_key(redis_prefix))
    finally:
        await client.aclose()
    await asyncio.sleep(1.05)
    assert await watch.budget_of("acme") is None
    assert watch.verified
    assert caplog.records[-1].getMessage() == "tenant budgets verified again"
