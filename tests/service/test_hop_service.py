"""Hops and idempotent replay as a service: each hop clause's answer is a recorded decision;
an `Idempotency-Key` answers with its decision again. In-memory twins, no database."""

from __future__ import annotations

import asyncio

import pytest

from leasegate.control_plane import keys
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.records import MintDecision
from tests.fixtures.control import (
    Control,
    account,
    body,
    control,
    decisions,
    last_decision,
    terminal_row,
    view_field,
)


async def refused(c: Control, *args: object, **kwargs: object) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, *args, **kwargs)  # type: ignore[arg-type]
    return caught.value


async def failed_on_a(c: Control) -> MintDecision:
    """A mint on `a` whose request failed (a qualifying row) and whose key was revoked."""
    await mint(c.deps, body())
    first = last_decision(c)
    c.store.evidence.append(terminal_row(first, "req-1"))
    await keys.revoke(c.deps, first.key_id or "")
    return first


async def test_an_authorised_retry_moves_down_the_list_and_continues_the_chain() -> None:
    c = control()
    first = await failed_on_a(c)
    await mint(c.deps, body(retry_of_mint_decision_id=first.id))
    hop = last_decision(c)
    assert (hop.kind, hop.account_id, hop.fallback_position, hop.hop) == ("retry", "b", 1, 1)
    assert (hop.cites_decision_id, hop.authorised_by_request_id) == (first.id, "req-1")
    assert hop.chain_id == first.chain_id
    assert c.store.decisions[first.id].successor_id == hop.id


async def test_a_retry_without_qualifying_evidence_is_held_and_recorded() -> None:
    c = control()
    await mint(c.deps, body())
    first = last_decision(c)
    await keys.revoke(c.deps, first.key_id or "")
    error = await refused(c, body(retry_of_mint_decision_id=first.id))
    assert (error.code, error.retry_after_s) == ("fallback-not-authorised", 1.0)
    held = last_decision(c)
    # recorded as the hop it would have been
    assert (held.outcome, held.fallback_position, held.hop) == ("refused", 1, 1)
    assert held.cites_decision_id == first.id


async def test_a_retry_while_the_cited_lease_is_live_is_held() -> None:
    c = control()
    await mint(c.deps, body())
    first = last_decision(c)
    c.store.evidence.append(terminal_row(first, "req-1"))
    error = await refused(c, body(retry_of_mint_decision_id=first.id))
    assert error.code == "fallback-lease-still-held"


async def test_citing_an_unknown_decision_is_held_with_no_position() -> None:
    c = control()
    error = await refused(c, body(retry_of_mint_decision_id="md_unknown"))
    assert (error.code, error.retry_after_s) == ("fallback-lineage-unknown", 5.0)
    assert last_decision(c).fallback_position is None


async def test_a_second_hop_from_the_same_decision_is_told_its_successor() -> None:
    c = control()
    first = await failed_on_a(c)
    await mint(c.deps, body(retry_of_mint_decision_id=first.id))
    successor = last_decision(c)
    await keys.revoke(c.deps, successor.key_id or "")
    error = await refused(c, body(retry_of_mint_decision_id=first.id))
    assert error.code == "fallback-cited-decision-superseded"
    assert error.extra["successor_mint_decision_id"] == successor.id


async def test_hops_past_the_ceiling_are_held() -> None:
    c = control(max_fallback_hops=0)
    first = await failed_on_a(c)
    error = await refused(c, body(retry_of_mint_decision_id=first.id))
    assert error.code == "fallback-budget-exhausted"


async def test_a_supersede_of_a_lost_response_walks_from_the_same_position() -> None:
    c = control()
    await mint(c.deps, body())
    first = last_decision(c)
    await keys.revoke(c.deps, first.key_id or "")
    await mint(c.deps, body(supersedes_mint_decision_id=first.id))
    again = last_decision(c)
    assert (again.kind, again.account_id, again.hop) == ("supersede", "a", 0)


async def test_a_hop_may_not_bring_a_budget_of_its_own() -> None:
    c = control()
    first = await failed_on_a(c)
    error = await refused(c, body(retry_of_mint_decision_id=first.id, budget={"max_tokens": 10}))
    assert error.code == "invalid-request"
    assert last_decision(c).chain_id == first.chain_id  # recorded in the chain it tried


async def test_a_replay_answers_with_the_same_decision_and_no_secret() -> None:
    c = control()
    created = await mint(c.deps, body(), "idem-1")
    replayed = await mint(c.deps, body(), "idem-1")
    assert (created.status, replayed.status) == (201, 200)
    assert len(decisions(c)) == 1
    assert view_field(replayed.view, "key") is None
    assert view_field(created.view, "key") is not None
    decision_id = view_field(replayed.view, "mint_decision_id")
    assert decision_id == view_field(created.view, "mint_decision_id")


async def test_the_same_key_with_another_body_is_refused_without_claiming_the_key() -> None:
    c = control()
    await mint(c.deps, body(), "idem-1")
    original = last_decision(c)
    error = await refused(c, body(role="reviewer"), "idem-1")
    assert error.code == "idempotency-key-reused"
    assert error.extra["original_mint_decision_id"] == original.id
    assert last_decision(c).idempotency_key is None


async def test_a_replay_of_a_refusal_is_the_same_refusal_not_a_new_decision() -> None:
    c = control()
    first = await refused(c, body(model="no-such-model"), "idem-1")
    again = await refused(c, body(model="no-such-model"), "idem-1")
    assert again.code == first.code == "model-not-served"
    assert again.mint_decision_id == first.mint_decision_id
    assert len(decisions(c)) == 1


async def test_concurrent_mints_with_one_key_get_one_decision() -> None:
    c = control(account("a", lease_capacity=5))  # counted: the mints interleave
    results = await asyncio.gather(mint(c.deps, body(), "idem-1"), mint(c.deps, body(), "idem-1"))
    assert sorted(r.status for r in results) == [200, 201]
    assert len(decisions(c)) == 1
    assert len(c.store.keys) == 1
