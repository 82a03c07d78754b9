"""A mint's `affinity`: a session stays on the account that last served it while that account
is eligible and has room, within the TTL; otherwise the pool's order decides. In-memory twins
(the store's affinity read has its own contract on both databases)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from leasegate.control_plane import keys
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from leasegate.core.ports.quota import Bucket, Quota
from leasegate.core.records import MintDecision
from leasegate.kv.quota_memory import InProcessQuotaStore
from tests.fixtures.control import (
    SERVED,
    T0,
    Control,
    account,
    body,
    control,
    last_decision,
    skipped,
    terminal_row,
)

SESSION = "session-7"


async def on_b(c: Control, dispatch_id: str = "d1") -> MintDecision:
    """A dispatch of SESSION that landed on `b` because `a` was cooling then (the cooldown has
    ended since): `a`, first in the pool, has room again."""
    c.health.cooling[("a", SERVED)] = Cooldown("a", SERVED, T0.timestamp() + 5, "http-429", 1)
    await mint(c.deps, body(dispatch_id, affinity=SESSION))
    first = last_decision(c)
    assert (first.account_id, first.affinity, first.affinity_hit) == ("b", SESSION, False)
    c.clock.advance(10)
    return first


async def test_a_second_dispatch_of_the_session_stays_on_its_account_though_a_has_room() -> None:
    c = control()
    await on_b(c)
    minted = await mint(c.deps, body("d2", affinity=SESSION))
    second = last_decision(c)
    assert (second.account_id, second.affinity_hit, skipped(second)) == ("b", True, [])
    assert second.fallback_position == 1
    assert minted.view.affinity_hit is True
    await mint(c.deps, body("d3"))  # without the affinity, the pool's order
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("a", False)


async def test_another_tenant_or_model_naming_the_same_id_is_not_followed() -> None:
    c = control()
    await on_b(c)
    await mint(c.deps, body("d2", affinity=SESSION, tenant="other"))
    assert last_decision(c).account_id == "a"


@pytest.mark.parametrize(
    ("breaks", "code"),
    [
        ("cooling", "model-cooling"),
        ("disabled", "administratively-disabled"),
        ("full", "lease-capacity-exhausted"),
        ("circuit", "circuit-open"),
    ],
)
async def test_an_account_that_cannot_serve_breaks_the_affinity(breaks: str, code: str) -> None:
    c = control(account("a"), account("b", lease_capacity=1))
    await on_b(c)
    if breaks == "cooling":
        c.health.cooling[("b", SERVED)] = Cooldown("b", SERVED, c.clock.at.timestamp() + 30, "x", 1)
    elif breaks == "disabled":
        c.chain.operator_sets("b", "disabled")
    elif breaks == "circuit":
        c.health.circuits["b"] = Cooldown("b", None, c.clock.at.timestamp() + 30, "http-401", 1)
    # "full": d1's key still holds b's one lease
    await mint(c.deps, body("d2", affinity=SESSION))
    second = last_decision(c)
    assert (second.account_id, second.affinity_hit) == ("a", False)
    # the miss and its reason, in fields of the decision's own; the walk skipped nothing
    assert (second.affinity_miss_account_id, second.affinity_miss_code) == ("b", code)
    assert skipped(second) == []
    # the session now lives on `a`: its next dispatch follows it there
    await mint(c.deps, body("d3", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("a", True)


async def test_the_affinity_expires_after_the_ttl() -> None:
    c = control()
    await on_b(c)  # the clock moved 10 s past the decision
    c.clock.advance(300 - 10 - 1)
    await mint(c.deps, body("d2", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("b", True)
    c.clock.advance(300 + 1)  # past the TTL of the latest decision naming it
    await mint(c.deps, body("d3", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("a", False)


async def test_a_hop_walks_on_and_the_next_dispatch_follows_the_hop() -> None:
    c = control(account("a"), account("b"), account("c"))
    first = await on_b(c)
    c.store.evidence.append(terminal_row(first, "req-1"))
    await keys.revoke(c.deps, first.key_id or "")
    await mint(c.deps, body(retry_of_mint_decision_id=first.id, affinity=SESSION))
    hop = last_decision(c)
    assert (hop.kind, hop.account_id, hop.affinity_hit) == ("retry", "c", False)
    await mint(c.deps, body("d2", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("c", True)


async def test_a_renewal_keeps_the_affinity_fresh() -> None:
    c = control()
    first = await on_b(c)
    c.clock.advance(250)
    await keys.renew(c.deps, first.key_id or "", None)
    assert last_decision(c).affinity == SESSION
    c.clock.advance(250)  # 510 s after the first mint, 250 s after the renewal
    await mint(c.deps, body("d2", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("b", True)


@pytest.mark.parametrize("bad", ["", "x" * 201, "tab\there", "nul\x00"])
def test_an_affinity_that_is_empty_too_long_or_not_printable_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="affinity"):
        body(affinity=bad)


async def test_a_refused_mint_records_its_affinity() -> None:
    c = control(account("a"))
    c.health.cooling[("a", SERVED)] = Cooldown("a", SERVED, T0.timestamp() + 5, "http-429", 1)
    with pytest.raises(GatewayError):
        await mint(c.deps, body(affinity=SESSION))
    assert (last_decision(c).affinity, last_decision(c).outcome) == (SESSION, "refused")


async def quota_on_b(c: Control, bucket: Bucket) -> None:
    store = InProcessQuotaStore()
    now = c.clock.at.timestamp()
    await store.learn([Quota("b", SERVED, {"requests": bucket}, "headers", now)], now)
    c.deps = replace(c.deps, quota=store)


async def test_a_session_waits_a_moment_for_its_accounts_quota_rather_than_lose_its_cache() -> None:
    """`b` has no request left, but 60 refill over 30 s: one is back in 0.5 s, within the
    affinity's short wait. The session stays (the proxy's refusal says when to come back);
    a mint without the affinity passes `b` over as ever."""
    c = control()
    await on_b(c)
    await quota_on_b(c, Bucket(60, 0, c.clock.at.timestamp() + 30))
    await mint(c.deps, body("d2", affinity=SESSION))
    assert (last_decision(c).account_id, last_decision(c).affinity_hit) == ("b", True)
    c.health.cooling[("a", SERVED)] = Cooldown("a", SERVED, c.clock.at.timestamp() + 5, "x", 1)
    await mint(c.deps, body("d3"))  # a, b, c in the pool: a cooling, b without room
    assert skipped(last_decision(c)) == [("a", "model-cooling"), ("b", "quota-exhausted")]


async def test_a_session_whose_account_is_throttled_longer_goes_to_the_next_with_room() -> None:
    """`b` is empty until its reset 5 s away: longer than the short wait. The next dispatch
    goes to `a` and the decision says why the session's account was not taken."""
    c = control()
    await on_b(c)
    await quota_on_b(c, Bucket(None, 0, c.clock.at.timestamp() + 5))
    minted = await mint(c.deps, body("d2", affinity=SESSION))
    second = last_decision(c)
    assert (second.account_id, second.affinity_hit) == ("a", False)
    assert (second.affinity_miss_account_id, second.affinity_miss_code) == ("b", "quota-exhausted")
    assert skipped(second) == []
    assert minted.view.passed_over == ()
    miss = minted.view.affinity_miss
    assert miss is not None
    assert (miss.account_id, miss.code) == ("b", "quota-exhausted")
