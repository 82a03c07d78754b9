"""The console's browsing reads (`leasegate.core.ports.browse`) on SQLite and Postgres: live
keys by tenant and account, recent dispatches by tenant, outcome and time range, and traffic
per account counted in buckets aligned to the epoch."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from leasegate.core.records import REVOKED
from leasegate.db import Store
from leasegate.db.browse import BrowseRepository
from tests.fixtures.evidence import evidence_row
from tests.fixtures.storage import T0, make_decision, minted

MINUTE = timedelta(minutes=1)


async def test_live_keys_are_the_unended_ones_newest_first(store: Store) -> None:
    browse = BrowseRepository(store.db)
    web = minted("acme/web", "d-1", at=T0)
    batch = minted("acme/batch", "d-2", account_id="claude-main", at=T0 + MINUTE)
    ended = minted("acme/web", "d-3", at=T0)
    short = minted("acme/web", "d-4", at=T0, ttl=timedelta(seconds=30))
    for decision, key in (web, batch, ended, short):
        await store.commit_mint(decision, key, lease_capacity=None, now=decision.created_at)
    await store.revoke_key(ended[1].key_id, REVOKED, T0 + MINUTE)
    now = T0 + 2 * MINUTE
    every = await browse.live_keys(now, tenant=None, account_id=None, limit=10)
    assert [k.key_id for k in every] == [batch[1].key_id, web[1].key_id]
    assert (every[1].tenant, every[1].dispatch_id, every[1].account_id) == (
        "acme/web",
        "d-1",
        "openai-main",
    )
    assert every[1].expires_at == web[1].expires_at
    only = await browse.live_keys(now, tenant="acme/web", account_id=None, limit=10)
    assert [k.key_id for k in only] == [web[1].key_id]
    by_account = await browse.live_keys(now, tenant=None, account_id="claude-main", limit=10)
    assert [k.key_id for k in by_account] == [batch[1].key_id]
    assert len(await browse.live_keys(now, tenant=None, account_id=None, limit=1)) == 1


async def test_recent_dispatches_count_their_decisions_in_the_range(store: Store) -> None:
    browse = BrowseRepository(store.db)
    first, key = minted("acme/web", "d-1", at=T0)
    await store.commit_mint(first, key, lease_capacity=None, now=T0)
    await store.record_decision(
        make_decision("acme/web", "d-1", at=T0 + MINUTE, outcome="refused", account_id=None)
    )
    await store.record_decision(replace(make_decision("beta/ci", "d-9", at=T0 + 2 * MINUTE), hop=1))
    await store.record_decision(make_decision("acme/web", "d-old", at=T0 - 2 * MINUTE))
    until = T0 + 3 * MINUTE
    found = await browse.recent_dispatches(T0, until, tenant=None, outcome=None, limit=10)
    assert [(d.tenant, d.dispatch_id) for d in found] == [("beta/ci", "d-9"), ("acme/web", "d-1")]
    d1 = found[1]
    assert (d1.decisions, d1.selected, d1.refused, d1.max_hop) == (2, 1, 1, 0)
    assert (d1.first_at, d1.last_at) == (T0, T0 + MINUTE)
    assert found[0].max_hop == 1
    refused = await browse.recent_dispatches(T0, until, tenant=None, outcome="refused", limit=10)
    assert [(d.dispatch_id, d.decisions, d.refused) for d in refused] == [("d-1", 1, 1)]
    ours = await browse.recent_dispatches(
        T0 - 5 * MINUTE, until, tenant="acme/web", outcome=None, limit=10
    )
    assert [d.dispatch_id for d in ours] == ["d-1", "d-old"]
    assert len(await browse.recent_dispatches(T0, until, tenant=None, outcome=None, limit=1)) == 1


async def test_traffic_counts_requests_and_failures_per_account_and_bucket(store: Store) -> None:
    browse = BrowseRepository(store.db)
    rows = [
        evidence_row("req_1", T0 + timedelta(seconds=5)),
        replace(evidence_row("req_2", T0 + timedelta(seconds=59.9)), outcome="upstream-error"),
        replace(evidence_row("req_3", T0 + timedelta(seconds=61)), outcome="client-abort"),
        replace(evidence_row("req_4", T0 + timedelta(seconds=62)), account_id="claude-main"),
        replace(
            evidence_row("req_5", T0 + timedelta(seconds=63)), account_id=None, outcome="refused"
        ),
        evidence_row("req_6", T0 + 5 * MINUTE),  # after the range
    ]
    await store.write_evidence(rows)
    points = await browse.traffic(T0, T0 + 2 * MINUTE, 60, account_ids=())
    assert sorted((p.account_id or "", p.start, p.requests, p.failures) for p in points) == [
        ("", T0 + MINUTE, 1, 1),
        ("claude-main", T0 + MINUTE, 1, 0),
        ("openai-main", T0, 2, 1),
        ("openai-main", T0 + MINUTE, 1, 0),
    ]
    one = await browse.traffic(T0, T0 + 2 * MINUTE, 3600, account_ids=["openai-main"])
    assert [(p.start, p.requests, p.failures) for p in one] == [(T0, 3, 1)]
