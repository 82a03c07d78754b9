"""Every store raises the core's `StoreUnavailable` when it cannot be reached, from every call.

That is what the services catch (and answer 503 `unavailable`, or degrade around): a driver's
own exception escaping an adapter would be a 500. Nothing listens on port 1 of the loopback, so
each call fails at once with the driver's connection error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from leasegate.audit import Anchor, AuditRecord
from leasegate.audit.appends import AppendPlan
from leasegate.audit.reads import ChainSnapshot
from leasegate.core.observation import Classification
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.ports.health import HealthNews, HealthPolicy
from leasegate.core.ports.revocation import Revocation
from leasegate.core.ports.witness import Witness
from leasegate.db import Store
from leasegate.db.audit import AuditRepository
from leasegate.db.partitions import EvidencePartitions
from leasegate.kv.connect import redis_client
from leasegate.kv.health_fanout_redis import RedisHealthFanout
from leasegate.kv.health_redis import RedisHealthStore
from leasegate.kv.redis_client import RedisClient, cluster_client, ping
from leasegate.kv.revocations_redis import RedisRevocationBus
from leasegate.kv.slots_redis import RedisRequestSlots
from leasegate.kv.spend_redis import RedisChainSpend
from leasegate.kv.witness_redis import RedisAuditWitness
from tests.fixtures.evidence import evidence_row
from tests.fixtures.storage import minted

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
EPOCH = NOW.timestamp()
FAILURE = Classification("upstream-error", "model", True, "http-503")

Call = Callable[[], Awaitable[Any]]


@pytest.fixture(params=["postgres", "sqlite"])
async def unreachable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Postgres on a port nobody listens on; SQLite on a file that is not a database (a
    failed SQLite connect can leave aiosqlite's worker thread complaining after the test)."""
    if request.param == "postgres":
        url = "postgresql+asyncpg://postgres@127.0.0.1:1/leasegate"
    else:
        garbage = tmp_path / "leasegate.db"
        garbage.write_bytes(b"not a database" * 512)
        url = f"sqlite+aiosqlite:///{garbage}"
    store = Store.connect(url)
    yield store
    await store.close()


def _database_calls(store: Store) -> dict[str, Call]:
    decision, key = minted()
    audit = AuditRepository(store.db)

    def plan(_: ChainSnapshot) -> AppendPlan:
        return AppendPlan(None, lambda _n: (_record(), Anchor(1, "h", "s")))

    return {
        "get_key": lambda: store.get_key(key.key_id),
        "commit_mint": lambda: store.commit_mint(decision, key, lease_capacity=1, now=NOW),
        "record_decision": lambda: store.record_decision(decision),
        "renew_key": lambda: store.renew_key(
            key.key_id, decision, key, lease_capacity=None, now=NOW
        ),
        "revoke_key": lambda: store.revoke_key(key.key_id, "revoked", NOW),
        "revoke_account_keys": lambda: store.revoke_account_keys("openai-main", "revoked", NOW),
        "live_lease_counts": lambda: store.live_lease_counts(["openai-main"], NOW),
        "get_decision": lambda: store.get_decision(decision.id),
        "decisions_for_dispatch": lambda: store.decisions_for_dispatch("t", "d"),
        "find_idempotent": lambda: store.find_idempotent("t", "k"),
        "evidence_summary": lambda: store.evidence_summary(decision.id),
        "live_key_of_dispatch": lambda: store.live_key_of_dispatch("t", "d", NOW),
        "write_evidence": lambda: store.write_evidence([evidence_row("r1", NOW)]),
        "query_evidence": lambda: store.query_evidence(limit=1),
        "outcome_counts": lambda: store.outcome_counts(NOW),
        "evidence_for_decisions": lambda: store.evidence_for_decisions([decision.id]),
        "read_chain": audit.read_chain,
        "read_head": audit.read_head,
        "append": lambda: audit.append(plan, NOW),
        "prune": lambda: EvidencePartitions(store.db).prune(NOW.date()),
    }


def _record() -> AuditRecord:
    return AuditRecord(
        seq=1,
        at=NOW,
        actor="a",
        authenticated_by="admin-token",
        on_behalf_of=None,
        account_id="openai-main",
        state="disabled",
        reason="r",
        revoked_keys=0,
        prev_hash="0" * 64,
        hash="h",
    )


async def test_every_database_call_raises_store_unavailable(unreachable_store: Store) -> None:
    assert await _escaping(_database_calls(unreachable_store)) == {}


@pytest.fixture(params=["redis", "cluster"])
async def unreachable_redis(request: pytest.FixtureRequest) -> AsyncIterator[RedisClient]:
    client: RedisClient
    if request.param == "redis":
        client = redis_client("redis://127.0.0.1:1/0")
    else:
        client = cluster_client([("127.0.0.1", 1)])
    yield client
    await client.aclose()


def _redis_calls(client: RedisClient) -> dict[str, Call]:
    health = RedisHealthStore(client, "lg-test", HealthPolicy())
    slots = RedisRequestSlots(client, "lg-test", lease_s=30.0)
    spend = RedisChainSpend(client, "lg-test")
    witness = RedisAuditWitness(client, "lg-test")
    revocations = RedisRevocationBus(client, "lg-test")
    news = RedisHealthFanout(client, "lg-test")
    return {
        "ping": lambda: ping(client),
        "health.snapshot": lambda: health.snapshot([("a", "m")], EPOCH),
        "health.admit": lambda: health.admit("a", "m", EPOCH),
        "health.record": lambda: health.record("a", "m", FAILURE, None, EPOCH),
        "slots.acquire": lambda: slots.acquire("a", "r1", 1, EPOCH),
        "slots.release": lambda: slots.release("a", ["r1"]),
        "slots.renew": lambda: slots.renew("a", ["r1"], EPOCH),
        "slots.in_flight": lambda: slots.in_flight(["a"], EPOCH),
        "spend.spent": lambda: spend.spent("c1"),
        "spend.add": lambda: spend.add("c1", 1, 1, EPOCH, 60.0),
        "spend.rebase": lambda: spend.rebase("c1", EPOCH, 1, 1, 60.0, only_if_unknown=True),
        "witness.read": witness.read,
        "witness.advance": lambda: witness.advance(Witness(1, "h")),
        "revocations.publish": lambda: revocations.publish([Revocation("k1", EPOCH)]),
        "health_news.publish": lambda: news.publish([HealthNews("a", "m", EPOCH)]),
    }


async def test_every_redis_call_raises_store_unavailable(unreachable_redis: RedisClient) -> None:
    assert await _escaping(_redis_calls(unreachable_redis)) == {}


async def _escaping(calls: dict[str, Call]) -> dict[str, str]:
    """The calls that did not raise StoreUnavailable, with what they did instead."""
    escaped: dict[str, str] = {}
    for name, call in calls.items():
        try:
            await call()
        except StoreUnavailable:
            continue
        except Exception as exc:  # reported by the assertion
            escaped[name] = type(exc).__name__
            continue
        escaped[name] = "returned"
    return escaped
