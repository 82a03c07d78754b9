"""The storage ports the control plane's services call (`MintStore`, `DecisionEvidenceReader`,
`UsageReader`), one suite for each
implementation: the SQL `Store` on SQLite and Postgres, and the in-memory twin the service
tests run on (`tests/fixtures/memory_store.py`). A twin that passes here may stand in for the
database in `tests/service/`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

import pytest

from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DecisionEvidenceReader,
    DispatchLeaseHeld,
    EvidenceSummary,
    IdempotencyKeyTaken,
    KeyNotLive,
    LeaseCapacityExhausted,
    MintStore,
)
from leasegate.core.ports.usage import UsageGroup, UsageReader
from leasegate.core.records import EvidenceRow, MintDecision
from leasegate.db import Store
from tests.fixtures.control import terminal_row
from tests.fixtures.memory_store import MemoryStore
from tests.fixtures.storage import BOTH_DATABASES, T0, emptied, make_decision, migrated, minted

LATER = T0 + timedelta(seconds=1)


class ServiceStore(MintStore, DecisionEvidenceReader, UsageReader, Protocol):
    """Every call the control plane's services make."""


@pytest.fixture(scope="module", params=["memory", *BOTH_DATABASES])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "memory":
        yield "memory"
        return
    with migrated(request.param, tmp_path_factory) as url:
        yield url


@pytest.fixture
async def mint_store(backend: str) -> AsyncIterator[ServiceStore]:
    if backend == "memory":
        yield MemoryStore()
        return
    opened = await emptied(backend)
    try:
        yield opened
    finally:
        await opened.close()


async def add_evidence(store: ServiceStore, rows: Sequence[EvidenceRow]) -> None:
    """Rows as the proxy's writer leaves them (the twin has no writer of its own)."""
    if isinstance(store, Store):
        await store.write_evidence(rows)
    else:
        assert isinstance(store, MemoryStore)
        store.evidence.extend(rows)


async def test_a_committed_mint_is_a_live_lease_and_its_decision(mint_store: ServiceStore) -> None:
    decision, key = minted(dispatch_id="d-1")
    await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await mint_store.get_key(key.key_id) == key
    assert await mint_store.get_decision(decision.id) == decision
    assert await mint_store.get_key_and_decision(key.key_id) == (key, decision)
    assert await mint_store.get_key_and_decision("k" + "0" * 24) is None
    assert await mint_store.decisions_for_dispatch(decision.tenant, "d-1") == [decision]
    assert await mint_store.live_key_of_dispatch(decision.tenant, "d-1", T0) == key.key_id
    assert await mint_store.live_lease_counts([key.account_id, "x"], T0) == {
        key.account_id: 1,
        "x": 0,
    }


async def test_one_live_lease_per_dispatch_until_it_expires(mint_store: ServiceStore) -> None:
    first = minted(dispatch_id="d-1", ttl=timedelta(minutes=1))
    await mint_store.commit_mint(*first, lease_capacity=None, now=T0)
    second = minted(dispatch_id="d-1")
    with pytest.raises(DispatchLeaseHeld):
        await mint_store.commit_mint(*second, lease_capacity=None, now=LATER)
    assert await mint_store.get_decision(second[0].id) is None
    expired = T0 + timedelta(minutes=2)
    third = minted(dispatch_id="d-1", at=expired)
    await mint_store.commit_mint(*third, lease_capacity=None, now=expired)
    assert await mint_store.live_key_of_dispatch(first[0].tenant, "d-1", expired) == third[1].key_id


async def test_a_full_account_refuses_and_writes_nothing(mint_store: ServiceStore) -> None:
    await mint_store.commit_mint(*minted(dispatch_id="d-1"), lease_capacity=1, now=T0)
    decision, key = minted(dispatch_id="d-2")
    with pytest.raises(LeaseCapacityExhausted):
        await mint_store.commit_mint(decision, key, lease_capacity=1, now=T0)
    assert await mint_store.get_key(key.key_id) is None
    assert await mint_store.get_decision(decision.id) is None


async def test_a_chain_never_branches(mint_store: ServiceStore) -> None:
    cited, cited_key = minted(dispatch_id="d-1")
    await mint_store.commit_mint(cited, cited_key, lease_capacity=None, now=T0)
    await mint_store.revoke_key(cited_key.key_id, "revoked", T0)
    hop = minted(dispatch_id="d-1", cites_decision_id=cited.id)
    await mint_store.commit_mint(*hop, lease_capacity=None, now=LATER)
    linked = await mint_store.get_decision(cited.id)
    assert linked is not None
    assert linked.successor_id == hop[0].id
    await mint_store.revoke_key(hop[1].key_id, "revoked", LATER)
    branch = minted(dispatch_id="d-1", cites_decision_id=cited.id)
    with pytest.raises(CitedDecisionSuperseded):
        await mint_store.commit_mint(*branch, lease_capacity=None, now=LATER)


async def test_an_idempotency_key_names_one_decision_per_tenant(mint_store: ServiceStore) -> None:
    refused = make_decision(
        dispatch_id="d-1", outcome="refused", account_id=None, idempotency_key="k1"
    )
    await mint_store.record_decision(refused)
    assert await mint_store.find_idempotent(refused.tenant, "k1") == refused
    assert await mint_store.find_idempotent("other", "k1") is None
    with pytest.raises(IdempotencyKeyTaken):
        await mint_store.record_decision(replace(refused, id="md_again"))
    decision, key = minted(dispatch_id="d-2", idempotency_key="k1")
    with pytest.raises(IdempotencyKeyTaken):
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await mint_store.get_key(key.key_id) is None
    await mint_store.record_decision(make_decision("other", idempotency_key="k1", account_id=None))


async def test_a_commit_held_to_another_chain_revision_is_refused(mint_store: ServiceStore) -> None:
    decision, key = minted(dispatch_id="d-1")
    with pytest.raises(AdminStateMoved):
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0, admin_revision=1)
    assert await mint_store.get_key(key.key_id) is None
    await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0, admin_revision=0)


async def test_a_renewal_passes_the_lease_to_the_new_key(mint_store: ServiceStore) -> None:
    decision, old = minted(dispatch_id="d-1")
    await mint_store.commit_mint(decision, old, lease_capacity=1, now=T0)
    renewal, new = minted(
        dispatch_id="d-1", at=LATER, kind="renewal", cites_decision_id=decision.id
    )
    ended = await mint_store.renew_key(old.key_id, renewal, new, lease_capacity=1, now=LATER)
    assert (ended.key_id, ended.revoke_reason) == (old.key_id, "renewed")
    assert await mint_store.live_lease_counts([old.account_id], LATER) == {old.account_id: 1}
    assert await mint_store.live_key_of_dispatch(old.tenant, "d-1", LATER) == new.key_id
    again, newer = minted(dispatch_id="d-1", at=LATER, kind="renewal")
    with pytest.raises(KeyNotLive):
        await mint_store.renew_key(old.key_id, again, newer, lease_capacity=1, now=LATER)


async def test_a_key_is_ended_once(mint_store: ServiceStore) -> None:
    decision, key = minted(dispatch_id="d-1")
    await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    record, ended = await mint_store.revoke_key(key.key_id, "revoked", LATER)
    assert ended
    assert record is not None
    assert record.revoked_at == LATER
    assert (await mint_store.revoke_key(key.key_id, "revoked", LATER))[1] is False
    assert await mint_store.revoke_key("k_unknown", "revoked", LATER) == (None, False)
    other = minted(dispatch_id="d-2")
    await mint_store.commit_mint(*other, lease_capacity=None, now=T0)
    ended_keys = await mint_store.revoke_account_keys(key.account_id, "account-disabled", LATER)
    assert [k.key_id for k in ended_keys] == [other[1].key_id]


async def test_a_hop_reads_the_earliest_qualifying_row(mint_store: ServiceStore) -> None:
    decision, key = minted(dispatch_id="d-1")
    await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await mint_store.evidence_summary(decision.id) == EvidenceSummary(False, None)
    early = replace(terminal_row(decision, "req-early"), started_at=T0)
    late = replace(terminal_row(decision, "req-late"), started_at=LATER)
    abort = replace(
        terminal_row(decision, "req-abort", outcome="client-abort", qualifying=False),
        started_at=T0 - timedelta(seconds=1),
    )
    await add_evidence(mint_store, [late, abort, early])
    assert await mint_store.evidence_summary(decision.id) == EvidenceSummary(True, "req-early")
    found = await mint_store.evidence_for_decisions([decision.id, "md_none"])
    assert [r.request_id for r in found[decision.id]] == ["req-late", "req-early", "req-abort"]
    assert found["md_none"] == []


async def test_the_affinity_answers_the_newest_selected_decision_naming_it(
    mint_store: ServiceStore,
) -> None:
    later = T0 + timedelta(seconds=5)
    old, new = (
        minted(dispatch_id="d-1", account_id="a", affinity="s-1", at=T0),
        minted(dispatch_id="d-2", account_id="b", affinity="s-1", at=later, affinity_hit=True),
    )
    for decision, key in (old, new):
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=decision.created_at)
    await mint_store.commit_mint(
        *minted(dispatch_id="d-3", account_id="c"), lease_capacity=None, now=T0
    )
    refused = make_decision(
        dispatch_id="d-4",
        account_id=None,
        outcome="refused",
        affinity="s-1",
        at=later + timedelta(seconds=1),
    )
    await mint_store.record_decision(refused)
    assert await mint_store.get_decision(new[0].id) == new[0]  # affinity and hit stored
    assert await mint_store.affinity_account("acme/web", "gpt-4o", "s-1", T0) == "b"
    assert await mint_store.affinity_account("acme/web", "gpt-4o", "s-2", T0) is None
    assert await mint_store.affinity_account("other", "gpt-4o", "s-1", T0) is None
    assert await mint_store.affinity_account("acme/web", "gpt-4", "s-1", T0) is None
    past = later + timedelta(microseconds=1)
    assert await mint_store.affinity_account("acme/web", "gpt-4o", "s-1", past) is None


async def test_the_pool_demand_counts_live_leases_by_tenant_and_starved_tenants(
    mint_store: ServiceStore,
) -> None:
    for n, (tenant, account_id) in enumerate(
        [("big", "a"), ("big", "b"), ("small", "a"), ("x", "z")]
    ):
        decision, key = minted(tenant, f"d-{n}", account_id=account_id)
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    _, ended = minted("small", "d-9", account_id="b")
    await mint_store.commit_mint(_, ended, lease_capacity=None, now=T0)
    await mint_store.revoke_key(ended.key_id, "revoked", T0)
    for tenant, model, code, at in [
        ("small", "gpt-4o", "no-eligible-account", LATER),
        ("late", "gpt-4o", "no-eligible-account", T0 - timedelta(seconds=30)),
        ("other-model", "gpt-4", "no-eligible-account", LATER),
        ("held-back", "gpt-4o", "tenant-fair-share-exceeded", LATER),
    ]:
        refused = make_decision(
            tenant, account_id=None, outcome="refused", refusal_code=code, model=model, at=at
        )
        await mint_store.record_decision(refused)
    since = T0 - timedelta(seconds=10)
    demand = await mint_store.pool_demand(["a", "b"], "gpt-4o", since, LATER, since)
    assert dict(demand.held) == {"big": 2, "small": 1}
    assert demand.starved == frozenset({"small"})
    assert dict(demand.spent) == {}  # no evidence: nothing spent
    empty = await mint_store.pool_demand([], "gpt-4o", since, LATER, since)
    assert (dict(empty.held), empty.starved) == ({}, frozenset({"small"}))


async def test_the_pool_demand_sums_what_each_tenants_keys_spent_on_the_pool_since_a_time(
    mint_store: ServiceStore,
) -> None:
    """Tokens in and out of the rows of each tenant's keys on the pool's accounts, started in
    [spent_since, now]: other accounts' rows, older or later rows and rows without usage
    count nothing; a revoked key's rows still count (its spend was in the window)."""
    big, big_key = minted("big", "d-1", account_id="a")
    small, small_key = minted("small", "d-2", account_id="b")
    other, other_key = minted("small", "d-3", account_id="z")
    for decision, key in ((big, big_key), (small, small_key), (other, other_key)):
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    await mint_store.revoke_key(small_key.key_id, "revoked", T0)

    def row(decision: MintDecision, name: str, tokens: int, at: datetime) -> EvidenceRow:
        base = replace(terminal_row(decision, name, outcome="success"), started_at=at)
        return replace(base, input_tokens=tokens, output_tokens=tokens // 10)

    await add_evidence(
        mint_store,
        [
            row(big, "r1", 1000, T0),
            row(big, "r2", 2000, T0 + timedelta(seconds=1)),
            row(small, "r3", 500, T0),
            row(other, "r4", 9999, T0),  # another pool's account
            row(big, "r5", 7777, T0 - timedelta(seconds=30)),  # before the window
            replace(row(small, "r6", 0, T0), input_tokens=None, output_tokens=None),
        ],
    )
    since = T0 - timedelta(seconds=10)
    demand = await mint_store.pool_demand(
        ["a", "b"], "gpt-4o", since, T0 + timedelta(seconds=2), spent_since=since
    )
    assert dict(demand.spent) == {"big": 3300.0, "small": 550.0}
    assert dict(demand.held) == {"big": 1}


async def test_a_decision_keeps_its_chains_residency(mint_store: ServiceStore) -> None:
    """Both columns round-trip through the one-call commit and a refusal's record alike."""
    decision, key = minted(
        dispatch_id="d-r",
        allowed_providers=("bedrock", "vertex"),
        allowed_regions=("eu-central-1",),
    )
    await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await mint_store.get_decision(decision.id) == decision
    refused = make_decision(
        dispatch_id="d-s", account_id=None, outcome="refused", allowed_regions=("global",)
    )
    await mint_store.record_decision(refused)
    stored = await mint_store.get_decision(refused.id)
    assert stored is not None
    assert (stored.allowed_providers, stored.allowed_regions) == (None, ("global",))


async def test_usage_sums_the_windows_rows_per_group_in_key_order(
    mint_store: ServiceStore,
) -> None:
    web_a, key_a = minted("acme/web", account_id="a")
    web_b, key_b = minted("acme/web", account_id="b")
    globex, key_g = minted("globex", account_id="a")
    for decision, key in ((web_a, key_a), (web_b, key_b), (globex, key_g)):
        await mint_store.commit_mint(decision, key, lease_capacity=None, now=T0)

    def row(decision: MintDecision, name: str, tokens: int, cost: str | None) -> EvidenceRow:
        base = replace(terminal_row(decision, name, outcome="success"), output_tokens=1)
        return replace(base, input_tokens=tokens, cost=None if cost is None else Decimal(cost))

    await add_evidence(
        mint_store,
        [
            row(web_a, "r1", 10, "0.5"),
            replace(row(web_a, "r2", 20, "1.25"), usage_estimated=True),
            row(web_b, "r3", 5, None),
            replace(row(globex, "r4", 7, "0.25"), started_at=T0 - timedelta(days=1)),
            replace(row(globex, "r5", 100, "9"), started_at=T0 + timedelta(days=3)),  # too late
        ],
    )
    since, until = T0 - timedelta(days=1), T0 + timedelta(days=1)

    def summed(groups: list[UsageGroup]) -> list[tuple[object, ...]]:
        return [
            (g.keys, g.requests, g.input_tokens, g.output_tokens, g.cost, g.estimated_requests)
            for g in groups
        ]

    by_tenant_account = await mint_store.usage(since, until, ("tenant", "account"), limit=10)
    assert summed(by_tenant_account) == [
        ({"tenant": "acme/web", "account": "a"}, 2, 30, 2, Decimal("1.75"), 1),
        ({"tenant": "acme/web", "account": "b"}, 1, 5, 1, None, 0),
        ({"tenant": "globex", "account": "a"}, 1, 7, 1, Decimal("0.25"), 0),
    ]
    by_day = await mint_store.usage(since, until, ("day",), limit=10)
    assert [(g.keys["day"], g.requests) for g in by_day] == [("2025-12-31", 1), ("2026-01-01", 3)]
    of_globex = await mint_store.usage(since, until, ("account",), limit=10, tenant="globex")
    assert summed(of_globex) == [({"account": "a"}, 1, 7, 1, Decimal("0.25"), 0)]
    second_page = await mint_store.usage(since, until, ("tenant", "account"), limit=1, offset=1)
    assert [g.keys for g in second_page] == [{"tenant": "acme/web", "account": "b"}]
