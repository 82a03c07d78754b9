"""The admin overlay as a service, over in-memory twins: state changes are appended and folded,
a stale revision or a corrupt chain is refused, a disable revokes the account's leases, and a
mint decided on a fold another replica has moved past decides again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from leasegate.control_plane.mint import mint
from leasegate.control_plane.overlay import AdminOverlay, StateChange
from leasegate.core.errors import GatewayError
from leasegate.kv.witness_memory import InProcessAuditWitness
from tests.fixtures.control import Control, account, body, control, last_decision, skipped
from tests.fixtures.memory_chain import MemoryChain


def replica(c: Control, chain: MemoryChain, witness: InProcessAuditWitness) -> AdminOverlay:
    """One control plane's overlay over the shared chain and witness."""
    return AdminOverlay(chain, witness, None, c.clock)


def change(account_id: str, state: str, expected_revision: int) -> StateChange:
    return StateChange(
        account_id=account_id,
        state=state,
        expected_revision=expected_revision,
        reason="maintenance",
        actor="ops",
        on_behalf_of=None,
    )


@pytest.fixture
def setup() -> tuple[Control, MemoryChain, InProcessAuditWitness]:
    c = control(account("a"), account("b"))
    return c, MemoryChain(c.store), InProcessAuditWitness()


async def test_a_state_change_is_appended_and_folded_into_the_overlay(
    setup: tuple[Control, MemoryChain, InProcessAuditWitness],
) -> None:
    c, chain, witness = setup
    overlay = replica(c, chain, witness)
    record, revoked = await overlay.mutate(change("a", "draining", 0))
    assert (record.seq, record.account_id, record.state, revoked) == (1, "a", "draining", [])
    verdict = await overlay.verdict()
    assert (verdict.status, verdict.revision, dict(verdict.overlay)) == ("ok", 1, {"a": "draining"})
    assert (await witness.read()) is not None


async def test_a_stale_revision_is_a_conflict_naming_the_current_one(
    setup: tuple[Control, MemoryChain, InProcessAuditWitness],
) -> None:
    c, chain, witness = setup
    overlay = replica(c, chain, witness)
    await overlay.mutate(change("a", "draining", 0))
    with pytest.raises(GatewayError) as caught:
        await overlay.mutate(change("a", "enabled", 0))
    assert caught.value.code == "revision-conflict"
    assert caught.value.extra["current_revision"] == 1
    assert len(chain.records) == 1


async def test_a_disable_revokes_the_accounts_leases_in_the_same_append(
    setup: tuple[Control, MemoryChain, InProcessAuditWitness],
) -> None:
    c, chain, witness = setup
    overlay = replica(c, chain, witness)
    deps = replace(c.deps, overlay=overlay)
    await mint(deps, body("d1"))
    await mint(deps, body("d2"))
    record, revoked = await overlay.mutate(change("a", "disabled", 0))
    assert sorted(k.dispatch_id for k in revoked) == ["d1", "d2"]
    assert record.revoked_keys == 2
    assert all(k.revoke_reason == "account-disabled" for k in c.store.keys.values())


async def test_a_tampered_chain_holds_mints_and_refuses_changes(
    setup: tuple[Control, MemoryChain, InProcessAuditWitness],
) -> None:
    c, chain, witness = setup
    overlay = replica(c, chain, witness)
    deps = replace(c.deps, overlay=overlay)
    await overlay.mutate(change("a", "disabled", 0))
    chain.tamper(1, state="enabled")  # someone re-enables `a` behind the chain's back
    verdict, _ = await overlay.read_full()
    assert verdict.status == "corrupt"
    with pytest.raises(GatewayError) as minting:
        await mint(deps, body())
    assert minting.value.code == "account-state-unavailable"
    assert last_decision(c).refusal_code == "account-state-unavailable"
    with pytest.raises(GatewayError) as changing:
        await overlay.mutate(change("b", "draining", 1))
    assert changing.value.code == "audit-chain-corrupt"


async def test_a_mint_on_a_fold_another_replica_moved_past_decides_again(
    setup: tuple[Control, MemoryChain, InProcessAuditWitness],
) -> None:
    c, chain, witness = setup
    here, there = replica(c, chain, witness), replica(c, chain, witness)
    deps = replace(c.deps, overlay=here)
    await mint(deps, body("d1"))  # `here` now holds a fresh fold: `a` enabled
    _, revoked = await there.mutate(change("a", "disabled", 0))
    assert [k.dispatch_id for k in revoked] == ["d1"]
    await mint(deps, body("d2"))
    decision = last_decision(c)
    assert decision.account_id == "b"
    assert skipped(decision) == [("a", "administratively-disabled")]
    assert c.store.commits == 3  # d1; d2 on `a`, refused as moved; d2 on `b`
