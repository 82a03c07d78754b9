"""Mint as a service: selection order, refusals recorded as decisions, the reservation's
re-walk and the re-decision when account state moves. In-memory twins, no database."""

from __future__ import annotations

import asyncio

import pytest

from leasegate.control_plane.mint import Minted, mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from tests.fixtures.control import (
    MODEL,
    SERVED,
    T0,
    Control,
    account,
    body,
    control,
    decisions,
    last_decision,
    skipped,
)


async def refused(c: Control, *args: object, **kwargs: object) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, *args, **kwargs)  # type: ignore[arg-type]
    return caught.value


async def test_a_fresh_mint_takes_the_first_account_and_records_its_decision() -> None:
    c = control()
    minted = await mint(c.deps, body())
    assert minted.status == 201
    decision = last_decision(c)
    assert decision.id == "md_000001"  # the injected id source
    assert (decision.outcome, decision.account_id, decision.fallback_position) == (
        "selected",
        "a",
        0,
    )
    assert decision.chain_id == decision.id  # a fresh mint starts its chain
    key = c.store.keys[decision.key_id or ""]
    assert (key.account_id, key.served_model, key.mint_decision_id) == ("a", SERVED, decision.id)
    assert key.expires_at == T0.replace(minute=15)  # the default ttl, from the clock


async def test_selection_skips_in_filter_order_and_records_each_skip() -> None:
    c = control(account("a", configured=False), account("b"), account("c"), account("d"))
    c.chain.operator_sets("b", "disabled")
    c.health.circuits["c"] = Cooldown("c", None, T0.timestamp() + 30, "http-401", 1)
    await mint(c.deps, body())
    decision = last_decision(c)
    assert decision.account_id == "d"
    assert skipped(decision) == [
        ("a", "not-configured"),
        ("b", "administratively-disabled"),
        ("c", "circuit-open"),
    ]


async def test_nobody_eligible_is_a_recorded_refusal_with_the_skips_and_a_wait() -> None:
    c = control(account("a"), account("b"))
    c.health.cooling[("a", SERVED)] = Cooldown("a", SERVED, T0.timestamp() + 20, "http-429", 1)
    c.health.cooling[("b", SERVED)] = Cooldown("b", SERVED, T0.timestamp() + 40, "http-429", 1)
    error = await refused(c, body())
    assert error.code == "no-eligible-account"
    assert error.retry_after_s == pytest.approx(20)
    decision = last_decision(c)
    assert error.mint_decision_id == decision.id
    assert (decision.outcome, decision.refusal_code) == ("refused", "no-eligible-account")
    assert skipped(decision) == [("a", "model-cooling"), ("b", "model-cooling")]
    assert c.store.keys == {}


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"model": "no-such-model"}, "model-not-served"),
        ({"ttl_s": 86401}, "invalid-request"),
        (
            {"retry_of_mint_decision_id": "md_x", "supersedes_mint_decision_id": "md_y"},
            "citation-conflict",
        ),
    ],
)
async def test_a_request_refused_on_its_face_is_recorded(
    fields: dict[str, object], code: str
) -> None:
    c = control()
    error = await refused(c, body(**fields))
    assert error.code == code
    assert [(d.outcome, d.refusal_code) for d in decisions(c)] == [("refused", code)]
    assert error.mint_decision_id == last_decision(c).id


async def test_a_second_mint_for_a_dispatch_with_a_live_lease_is_refused() -> None:
    c = control()
    await mint(c.deps, body("d1"))
    error = await refused(c, body("d1"))
    assert (error.code, error.status) == ("dispatch-lease-held", 409)
    assert len(c.store.keys) == 1


async def test_lease_held_comes_before_no_eligible_account() -> None:
    c = control(account("a", lease_capacity=1))
    await mint(c.deps, body("d1"))
    error = await refused(c, body("d1"))
    assert error.code == "dispatch-lease-held"  # not the full account's no-eligible-account


async def test_a_mint_losing_the_reservation_race_walks_on_to_the_next_account() -> None:
    c = control(account("a", lease_capacity=1), account("b"))
    first, second = await asyncio.gather(mint(c.deps, body("d1")), mint(c.deps, body("d2")))
    assert first.status == second.status == 201
    on_a, on_b = sorted(
        (d for d in decisions(c) if d.outcome == "selected"), key=lambda d: d.account_id or ""
    )
    assert (on_a.account_id, on_a.passed_over) == ("a", ())
    assert on_b.account_id == "b"
    # both read "a has room"; the second learnt otherwise from the reservation itself
    assert skipped(on_b) == [("a", "lease-capacity-exhausted")]
    assert c.store.commits == 3
    assert await c.store.live_lease_counts(["a"], T0) == {"a": 1}


async def test_losing_the_race_for_the_last_account_refuses_with_its_capacity() -> None:
    c = control(account("a", lease_capacity=1))
    outcomes = await asyncio.gather(
        mint(c.deps, body("d1")), mint(c.deps, body("d2")), return_exceptions=True
    )
    assert sum(isinstance(o, Minted) for o in outcomes) == 1
    (error,) = [o for o in outcomes if isinstance(o, GatewayError)]
    assert error.code == "no-eligible-account"
    assert skipped(last_decision(c)) == [("a", "lease-capacity-exhausted")]


async def test_account_state_moved_while_deciding_decides_again_from_a_fresh_fold() -> None:
    c = control(account("a"), account("b"))
    await c.chain.decided()  # a cached fold: nothing disabled
    c.chain.operator_sets("a", "disabled")  # the operator's change lands after that read
    await mint(c.deps, body())
    decision = last_decision(c)
    assert c.chain.forgotten == 1
    assert decision.account_id == "b"
    assert skipped(decision) == [("a", "administratively-disabled")]
    assert [k.account_id for k in c.store.keys.values()] == ["b"]


async def test_a_corrupt_chain_holds_mints_but_not_before_a_request_refused_on_its_face() -> None:
    c = control()
    c.chain.corrupt = True
    assert (await refused(c, body(model="no-such-model"))).code == "model-not-served"
    error = await refused(c, body())
    assert error.code == "account-state-unavailable"
    assert last_decision(c).refusal_code == "account-state-unavailable"
    assert c.store.keys == {}


async def test_the_served_model_and_requested_model_are_kept_apart() -> None:
    c = control(account("a", models={MODEL: "served-a"}))
    await mint(c.deps, body())
    key = next(iter(c.store.keys.values()))
    assert (key.model, key.served_model) == (MODEL, "served-a")
