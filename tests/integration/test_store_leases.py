"""Leases are key rows: capacity, one live lease per dispatch, and ending exactly once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from leasegate.core.ports.storage import (
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    KeyNotLive,
    LeaseCapacityExhausted,
)
from leasegate.core.records import KeyRecord, MintDecision
from leasegate.db import Store
from tests.fixtures.storage import T0, make_decision, make_key, minted

ACCOUNT = "openai-main"


async def _outcomes(
    store: Store, mints: list[tuple[MintDecision, KeyRecord]], capacity: int | None
) -> list[BaseException | None]:
    return await asyncio.gather(
        *(store.commit_mint(d, k, lease_capacity=capacity, now=T0) for d, k in mints),
        return_exceptions=True,
    )


async def test_concurrent_mints_never_exceed_lease_capacity(
    store: Store, migrated_url: str
) -> None:
    mints = [minted(account_id=ACCOUNT) for _ in range(200)]
    replica = Store.connect(migrated_url)  # a second control plane: its own engine and pool
    try:
        outcomes = await asyncio.gather(
            *(
                (store, replica)[i % 2].commit_mint(d, k, lease_capacity=10, now=T0)
                for i, (d, k) in enumerate(mints)
            ),
            return_exceptions=True,
        )
    finally:
        await replica.close()

    assert outcomes.count(None) == 10
    refusals = [o for o in outcomes if o is not None]
    assert all(isinstance(o, LeaseCapacityExhausted) for o in refusals), refusals[:3]
    assert await store.live_lease_counts([ACCOUNT, "other"], T0) == {ACCOUNT: 10, "other": 0}
    for (decision, key), outcome in zip(mints, outcomes, strict=True):
        if outcome is not None:  # a refused reservation leaves neither key nor decision
            assert await store.get_key(key.key_id) is None
            assert await store.get_decision(decision.id) is None

    ended = await store.revoke_account_keys(ACCOUNT, "account-disabled", T0)

    assert len(ended) == 10
    assert await store.live_lease_counts([ACCOUNT], T0) == {ACCOUNT: 0}


async def test_concurrent_mints_for_one_dispatch_leave_one_live_lease(store: Store) -> None:
    mints = [minted(dispatch_id="d-81", account_id=f"acct-{i % 5}") for i in range(50)]

    outcomes = await _outcomes(store, mints, capacity=None)

    assert outcomes.count(None) == 1
    assert all(isinstance(o, DispatchLeaseHeld) for o in outcomes if o is not None)
    decisions = await store.decisions_for_dispatch("acme/web", "d-81")
    assert len(decisions) == 1
    accounts = {f"acct-{i}" for i in range(5)}
    assert sum((await store.live_lease_counts(accounts, T0)).values()) == 1


async def test_a_dispatch_is_per_tenant(store: Store) -> None:
    for tenant in ("acme/web", "acme/api"):
        decision, key = minted(tenant, "d-1")
        await store.commit_mint(decision, key, lease_capacity=None, now=T0)

    decision, key = minted("acme/web", "d-1")
    with pytest.raises(DispatchLeaseHeld):
        await store.commit_mint(decision, key, lease_capacity=None, now=T0)


async def test_revocations_racing_on_one_key_end_it_exactly_once(store: Store) -> None:
    decision, key = minted(account_id=ACCOUNT)
    await store.commit_mint(decision, key, lease_capacity=1, now=T0)

    results = await asyncio.gather(
        *(store.revoke_key(key.key_id, "revoked", T0) for _ in range(10)),
        *(store.revoke_account_keys(ACCOUNT, "account-disabled", T0) for _ in range(5)),
    )

    ended_by_revoke = sum(1 for result in results[:10] if isinstance(result, tuple) and result[1])
    ended_by_disable = sum(len(result) for result in results[10:] if isinstance(result, list))
    assert ended_by_revoke + ended_by_disable == 1
    after = await store.get_key(key.key_id)
    assert after is not None
    assert after.state(T0) == "revoked"
    assert after.revoke_reason in {"revoked", "account-disabled"}
    assert await store.revoke_key(key.key_id, "revoked", T0) == (after, False)
    assert await store.revoke_key("k-unknown", "revoked", T0) == (None, False)


async def test_revoking_frees_the_dispatch_and_the_lease(store: Store) -> None:
    decision, key = minted(dispatch_id="d-1")
    await store.commit_mint(decision, key, lease_capacity=1, now=T0)

    record, ended = await store.revoke_key(key.key_id, "revoked", T0)

    assert ended
    assert record is not None
    assert record.revoked_at == T0
    again, again_key = minted(dispatch_id="d-1")
    await store.commit_mint(again, again_key, lease_capacity=1, now=T0)


async def test_expiry_frees_the_dispatch_and_the_lease_without_any_write(store: Store) -> None:
    decision, key = minted(dispatch_id="d-1", ttl=timedelta(seconds=10))
    await store.commit_mint(decision, key, lease_capacity=1, now=T0)
    later = T0 + timedelta(seconds=10)

    assert await store.live_lease_counts([ACCOUNT], T0 + timedelta(seconds=9)) == {ACCOUNT: 1}
    assert await store.live_lease_counts([ACCOUNT], later) == {ACCOUNT: 0}
    expired = await store.get_key(key.key_id)
    assert expired is not None
    assert expired.state(later) == "expired"
    # expiry already ended it: a later revoke or disable does not end it a second time
    assert (await store.revoke_key(key.key_id, "revoked", later))[1] is False
    assert await store.revoke_account_keys(ACCOUNT, "account-disabled", later) == []

    again, again_key = minted(dispatch_id="d-1", at=later)
    await store.commit_mint(again, again_key, lease_capacity=1, now=later)
    assert await store.live_lease_counts([ACCOUNT], later) == {ACCOUNT: 1}


async def test_renewal_moves_the_lease_to_the_new_key(store: Store) -> None:
    decision, old = minted(dispatch_id="d-1")
    await store.commit_mint(decision, old, lease_capacity=1, now=T0)
    renewed_at = T0 + timedelta(minutes=5)
    renewal, new = make_key(
        make_decision(dispatch_id="d-1", kind="renewal", at=renewed_at), at=renewed_at
    )

    before = await store.renew_key(old.key_id, renewal, new, lease_capacity=1, now=renewed_at)

    assert before.revoked_at == renewed_at
    assert before.revoke_reason == "renewed"
    assert await store.live_lease_counts([ACCOUNT], renewed_at) == {ACCOUNT: 1}
    live = await store.get_key(new.key_id)
    assert live is not None
    assert live.state(renewed_at) == "live"
    # the dispatch's slot went with it
    other, other_key = minted(dispatch_id="d-1", at=renewed_at)
    with pytest.raises(DispatchLeaseHeld):
        await store.commit_mint(other, other_key, lease_capacity=None, now=renewed_at)
    with pytest.raises(KeyNotLive):
        await store.renew_key(old.key_id, *minted(dispatch_id="d-1"), lease_capacity=1, now=T0)


async def test_renewal_of_an_expired_or_unknown_key_is_refused_and_writes_nothing(
    store: Store,
) -> None:
    decision, old = minted(dispatch_id="d-1", ttl=timedelta(seconds=1))
    await store.commit_mint(decision, old, lease_capacity=None, now=T0)
    later = T0 + timedelta(seconds=1)

    for key_id in (old.key_id, "k-unknown"):
        renewal, new = minted(dispatch_id="d-1", at=later, kind="renewal")
        with pytest.raises(KeyNotLive):
            await store.renew_key(key_id, renewal, new, lease_capacity=None, now=later)
        assert await store.get_key(new.key_id) is None
        assert await store.get_decision(renewal.id) is None


async def test_concurrent_renewals_of_one_key_produce_one_successor(store: Store) -> None:
    decision, old = minted(dispatch_id="d-1")
    await store.commit_mint(decision, old, lease_capacity=2, now=T0)
    renewals = [minted(dispatch_id="d-1", kind="renewal") for _ in range(10)]

    outcomes = await asyncio.gather(
        *(store.renew_key(old.key_id, d, k, lease_capacity=2, now=T0) for d, k in renewals),
        return_exceptions=True,
    )

    assert sum(1 for o in outcomes if isinstance(o, KeyRecord)) == 1
    assert all(isinstance(o, KeyNotLive) for o in outcomes if not isinstance(o, KeyRecord))
    assert await store.live_lease_counts([ACCOUNT], T0) == {ACCOUNT: 1}


async def test_a_hop_links_its_cited_decision_once(store: Store) -> None:
    first, first_key = minted(dispatch_id="d-1")
    await store.commit_mint(first, first_key, lease_capacity=None, now=T0)
    await store.revoke_key(first_key.key_id, "revoked", T0)
    hops = [
        minted(
            dispatch_id="d-1",
            at=T0 + timedelta(seconds=1),
            kind="retry",
            hop=1,
            cites_decision_id=first.id,
        )
        for _ in range(10)
    ]

    outcomes = await _outcomes(store, hops, capacity=None)

    assert outcomes.count(None) == 1
    assert all(isinstance(o, CitedDecisionSuperseded | DispatchLeaseHeld) for o in outcomes if o)
    winner = hops[outcomes.index(None)][0]
    cited = await store.get_decision(first.id)
    assert cited is not None
    assert cited.successor_id == winner.id
    assert [d.id for d in await store.decisions_for_dispatch("acme/web", "d-1")] == [
        first.id,
        winner.id,
    ]


async def test_a_superseded_citation_writes_nothing(store: Store) -> None:
    first, first_key = minted(dispatch_id="d-1")
    await store.commit_mint(first, first_key, lease_capacity=None, now=T0)
    await store.revoke_key(first_key.key_id, "revoked", T0)
    hop, hop_key = minted(dispatch_id="d-1", kind="retry", hop=1, cites_decision_id=first.id)
    await store.commit_mint(hop, hop_key, lease_capacity=None, now=T0)
    await store.revoke_key(hop_key.key_id, "revoked", T0)

    branch, branch_key = minted(dispatch_id="d-1", kind="retry", hop=1, cites_decision_id=first.id)
    with pytest.raises(CitedDecisionSuperseded):
        await store.commit_mint(branch, branch_key, lease_capacity=None, now=T0)

    assert await store.get_decision(branch.id) is None
    assert await store.get_key(branch_key.key_id) is None


async def test_leases_survive_a_restart(store: Store, migrated_url: str) -> None:
    for _ in range(3):
        await store.commit_mint(*minted(), lease_capacity=3, now=T0)

    restarted = Store.connect(migrated_url)
    try:
        assert await restarted.live_lease_counts([ACCOUNT], T0) == {ACCOUNT: 3}
        with pytest.raises(LeaseCapacityExhausted):
            await restarted.commit_mint(*minted(), lease_capacity=3, now=T0)
    finally:
        await restarted.close()
