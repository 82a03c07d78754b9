"""Mint decisions: refusals are recorded, every field round-trips, idempotency keys are unique."""

from __future__ import annotations

from datetime import timedelta

import pytest

from leasegate.core.errors import PassOver
from leasegate.core.ports.storage import DispatchLeaseHeld, IdempotencyKeyTaken
from leasegate.db import Store
from tests.fixtures.storage import T0, make_decision, minted


async def test_a_refused_mint_records_its_decision_and_no_key(store: Store) -> None:
    refused = make_decision(
        dispatch_id="d-1",
        account_id=None,
        outcome="refused",
        refusal_code="no-eligible-account",
        passed_over=(
            PassOver("openai-main", "model-cooling"),
            PassOver("openrouter", "lease-capacity-exhausted"),
        ),
        role=None,
    )

    await store.record_decision(refused)

    assert await store.get_decision(refused.id) == refused
    assert await store.decisions_for_dispatch("acme/web", "d-1") == [refused]
    assert await store.live_lease_counts(["openai-main", "openrouter"], T0) == {
        "openai-main": 0,
        "openrouter": 0,
    }


async def test_a_selected_decision_round_trips_every_field(store: Store) -> None:
    first, first_key = minted(dispatch_id="d-1")
    await store.commit_mint(first, first_key, lease_capacity=None, now=T0)
    await store.revoke_key(first_key.key_id, "revoked", T0)
    later = T0 + timedelta(milliseconds=1500)
    hop, hop_key = minted(
        dispatch_id="d-1",
        account_id="openrouter",
        at=later,
        kind="retry",
        hop=1,
        fallback_position=1,
        passed_over=(PassOver("openai-main", "circuit-open"),),
        cites_decision_id=first.id,
        authorised_by_request_id="req-9",
        idempotency_key="idem-1",
        request_fingerprint="sha256:abc",
    )

    await store.commit_mint(hop, hop_key, lease_capacity=None, now=later)

    assert await store.get_decision(hop.id) == hop
    key = await store.get_key(hop_key.key_id)
    assert key == hop_key
    assert key is not None
    assert key.created_at.utcoffset() == timedelta(0)
    history = await store.decisions_for_dispatch("acme/web", "d-1")
    assert [d.id for d in history] == [first.id, hop.id]
    assert history[0].successor_id == hop.id
    assert await store.get_decision("md_unknown") is None
    assert await store.get_key("k_unknown") is None


async def test_idempotency_keys_name_one_decision_per_tenant(store: Store) -> None:
    original = make_decision(idempotency_key="idem-1", request_fingerprint="fp-1")
    await store.record_decision(original)
    await store.record_decision(make_decision("other/tenant", idempotency_key="idem-1"))

    assert await store.find_idempotent("acme/web", "idem-1") == original
    assert await store.find_idempotent("acme/web", "idem-2") is None
    with pytest.raises(IdempotencyKeyTaken):
        await store.record_decision(make_decision(idempotency_key="idem-1"))
    decision, key = minted(idempotency_key="idem-1")
    with pytest.raises(IdempotencyKeyTaken):
        await store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await store.get_key(key.key_id) is None


async def test_a_held_dispatch_refuses_before_capacity(store: Store) -> None:
    await store.commit_mint(*minted(dispatch_id="d-1"), lease_capacity=1, now=T0)

    with pytest.raises(DispatchLeaseHeld):
        await store.commit_mint(*minted(dispatch_id="d-1"), lease_capacity=1, now=T0)
