"""The reads a hop needs: the cited decision's evidence summed up, the dispatch's live key,
and a renewal continuing the renewed decision's chain."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from leasegate.core.ports.storage import EvidenceSummary
from leasegate.db import Store
from tests.fixtures.storage import T0, minted
from tests.integration.test_store_evidence import _row


async def test_evidence_summary_names_the_earliest_qualifying_row(store: Store) -> None:
    assert await store.evidence_summary("md_1") == EvidenceSummary(False, None)
    await store.write_evidence([_row("req-a", seconds=1, qualifying=False, outcome="client-abort")])
    assert await store.evidence_summary("md_1") == EvidenceSummary(True, None)
    await store.write_evidence(
        [
            _row("req-late", seconds=5),
            _row("req-early", seconds=2),
            _row("req-other", seconds=0, mint_decision_id="md_2"),
        ]
    )
    assert await store.evidence_summary("md_1") == EvidenceSummary(True, "req-early")


async def test_live_key_of_dispatch_ignores_ended_keys(store: Store) -> None:
    decision, key = minted(dispatch_id="d-1", ttl=timedelta(minutes=1))
    await store.commit_mint(decision, key, lease_capacity=None, now=T0)
    assert await store.live_key_of_dispatch("acme/web", "d-1", T0) == key.key_id
    assert await store.live_key_of_dispatch("acme/web", "d-2", T0) is None
    assert await store.live_key_of_dispatch("acme/web", "d-1", T0 + timedelta(minutes=2)) is None
    await store.revoke_key(key.key_id, "revoked", T0)
    assert await store.live_key_of_dispatch("acme/web", "d-1", T0) is None


async def test_a_renewal_becomes_the_renewed_decisions_successor(store: Store) -> None:
    first, first_key = minted(dispatch_id="d-1")
    await store.commit_mint(first, first_key, lease_capacity=None, now=T0)
    renewal, renewal_key = minted(dispatch_id="d-1", kind="renewal")
    renewal = replace(renewal, cites_decision_id=first.id)
    renewal_key = replace(renewal_key, mint_decision_id=renewal.id)
    await store.renew_key(first_key.key_id, renewal, renewal_key, lease_capacity=None, now=T0)
    cited = await store.get_decision(first.id)
    assert cited is not None
    assert cited.successor_id == renewal.id
