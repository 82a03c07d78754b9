"""Renewal and revocation as a service: the lease passes to the new key, refusals are 4xx,
and every ended key is announced to the proxies. In-memory twins, no database."""

from __future__ import annotations

import pytest

from leasegate.control_plane import keys
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from leasegate.core.records import KeyRecord, MintDecision
from tests.fixtures.control import (
    SERVED,
    T0,
    Control,
    account,
    body,
    control,
    last_decision,
)


async def minted(c: Control) -> tuple[MintDecision, KeyRecord]:
    await mint(c.deps, body())
    decision = last_decision(c)
    return decision, c.store.keys[decision.key_id or ""]


async def renew_refused(c: Control, key_id: str) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        await keys.renew(c.deps, key_id, None)
    return caught.value


async def test_a_renewal_swaps_the_key_on_the_same_lease_and_announces_the_old_one() -> None:
    c = control(account("a", lease_capacity=1))
    first, old = await minted(c)
    c.clock.advance(60)
    await keys.renew(c.deps, old.key_id, 120)
    renewal = last_decision(c)
    assert (renewal.kind, renewal.account_id, renewal.cites_decision_id) == (
        "renewal",
        "a",
        first.id,
    )
    assert renewal.chain_id == first.chain_id
    assert c.store.keys[old.key_id].revoke_reason == "renewed"
    new = c.store.keys[renewal.key_id or ""]
    assert new.expires_at == c.clock.now().replace(minute=3)  # 12:01 + 120 s
    assert await c.store.live_lease_counts(["a"], c.clock.now()) == {"a": 1}
    assert [r.key_id for r in c.published.revocations] == [old.key_id]


async def test_renewing_an_ended_or_unknown_key_is_refused() -> None:
    c = control()
    _, old = await minted(c)
    await keys.revoke(c.deps, old.key_id)
    assert (await renew_refused(c, old.key_id)).code == "key-not-live"
    assert (await renew_refused(c, "k_unknown")).code == "key-not-found"


async def test_a_renewal_refuses_an_open_circuit_or_a_drain_but_not_a_cooling_model() -> None:
    c = control()
    _, old = await minted(c)
    c.health.cooling[("a", SERVED)] = Cooldown("a", SERVED, T0.timestamp() + 30, "http-429", 1)
    await keys.renew(c.deps, old.key_id, None)  # a cooling model does not end a lease
    renewed = c.store.keys[last_decision(c).key_id or ""]
    c.health.circuits["a"] = Cooldown("a", None, T0.timestamp() + 30, "http-401", 1)
    error = await renew_refused(c, renewed.key_id)
    assert (error.code, error.status) == ("circuit-open", 409)
    c.health.circuits.clear()
    c.chain.operator_sets("a", "draining")
    c.chain.forget()
    assert (await renew_refused(c, renewed.key_id)).code == "administratively-draining"


async def test_a_renewal_decided_on_a_stale_overlay_decides_again() -> None:
    c = control()
    _, old = await minted(c)  # the overlay's fold is now cached
    c.chain.operator_sets("a", "disabled")
    error = await renew_refused(c, old.key_id)
    assert c.chain.forgotten == 1
    assert (error.code, error.status) == ("administratively-disabled", 409)
    assert c.store.keys[old.key_id].revoked_at is None


async def test_a_renewal_longer_than_allowed_is_refused_before_anything_changes() -> None:
    c = control(key_max_ttl_s=1000)
    _, old = await minted(c)
    with pytest.raises(GatewayError) as caught:
        await keys.renew(c.deps, old.key_id, 1001)
    assert caught.value.code == "invalid-request"
    assert c.store.keys[old.key_id].revoked_at is None


async def test_every_revoke_is_announced_even_a_repeated_one() -> None:
    c = control()
    _, key = await minted(c)
    await keys.revoke(c.deps, key.key_id)
    await keys.revoke(c.deps, key.key_id)  # heals a lost fan-out message
    assert [r.key_id for r in c.published.revocations] == [key.key_id, key.key_id]
    with pytest.raises(GatewayError) as caught:
        await keys.revoke(c.deps, "k_unknown")
    assert caught.value.code == "key-not-found"
