"""Adaptive lease ceilings in the mint: an (account, served model) whose learned quota has no
room now, or whose live leases already spend what its quota refills, is passed over as
`quota-exhausted` (model scope, with when room is expected); the pool keeps its order, and the
operator's `lease_capacity` stays an upper bound. In-memory twins: the in-process quota store
and a fixed per-lease spend."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from leasegate.accounts import DeclaredLimits, Registry
from leasegate.control_plane.mint import mint
from leasegate.control_plane.refills import RefillInformedQuotas
from leasegate.core.errors import GatewayError
from leasegate.core.ports.quota import Bucket, Quota
from leasegate.kv.quota_memory import InProcessQuotaStore
from leasegate.routing.lease_ceiling import LeaseRate, default_prior
from tests.fixtures.control import (
    SERVED,
    T0,
    Control,
    FixedRates,
    account,
    body,
    control,
    last_decision,
    skipped,
)

NOW = T0.timestamp()
ONE_LEASE = LeaseRate(requests_per_s=1.0, input_tokens_per_s=800.0, output_tokens_per_s=200.0)
"""A live lease sends a request of 1,000 tokens a second."""


def sustaining(account_id: str, leases: int) -> Quota:
    """A declared quota that refills what `leases` leases of ONE_LEASE spend, full now."""
    requests, tokens = 60 * leases, 60_000 * leases
    return Quota(
        account_id,
        SERVED,
        {
            "requests": Bucket(requests, requests, None, 60.0),
            "tokens": Bucket(tokens, tokens, None, 60.0),
        },
        "declared",
        NOW,
    )


async def with_quotas(c: Control, *quotas: Quota, rated: bool = True) -> Control:
    store = InProcessQuotaStore()
    await store.learn(list(quotas), NOW)
    rates = FixedRates({(q.account_id, q.model): ONE_LEASE for q in quotas} if rated else {})
    c.deps = replace(c.deps, quota=store, lease_rates=rates)
    return c


async def test_an_empty_bucket_is_passed_over_until_it_refills() -> None:
    empty = Quota("a", SERVED, {"requests": Bucket(60, 0, NOW + 30)}, "headers", NOW)
    c = await with_quotas(control(account("a"), account("b")), empty)
    await mint(c.deps, body("d1"))
    assert (last_decision(c).account_id, skipped(last_decision(c))) == (
        "b",
        [("a", "quota-exhausted")],
    )
    c.clock.advance(0.5)  # 60 requests over 30 s: one is back after half a second
    await mint(c.deps, body("d2"))
    assert last_decision(c).account_id == "a"


async def test_nobody_with_room_is_a_model_scope_refusal_naming_when_room_comes() -> None:
    quotas = [
        Quota("a", SERVED, {"requests": Bucket(60, 0, NOW + 30)}, "headers", NOW),  # 0.5 s
        Quota("b", SERVED, {"tokens": Bucket(None, 0, NOW + 4)}, "headers", NOW),  # 4 s
    ]
    c = await with_quotas(control(account("a"), account("b")), *quotas, rated=False)
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body())
    refusal = caught.value
    assert refusal.code == "no-eligible-account"
    assert [(p.account_id, p.code) for p in refusal.passed_over] == [
        ("a", "quota-exhausted"),
        ("b", "quota-exhausted"),
    ]
    assert refusal.cooldown_scope == "model"
    assert refusal.retry_after_s == pytest.approx(0.5)


async def test_accounts_fill_in_pool_order_up_to_what_their_quota_sustains() -> None:
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 2), sustaining("b", 3)
    )
    placed = []
    for n in range(5):
        placed.append((await mint(c.deps, body(f"d{n}"))).view.account_id)
    assert placed == ["a", "a", "b", "b", "b"]
    assert skipped(last_decision(c)) == [("a", "quota-exhausted")]
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body("d5"))
    assert caught.value.cooldown_scope == "model"
    # room comes when a lease turns over; the tenant's longest-waiting dispatch comes back
    # sooner (the next lease is its: capacity.waiting), the others in a second
    assert caught.value.retry_after_s == pytest.approx(0.1)
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body("d6"))
    assert caught.value.retry_after_s == pytest.approx(1.0)


async def test_the_operators_lease_capacity_stays_an_upper_bound() -> None:
    c = await with_quotas(control(account("a", lease_capacity=1), account("b")), sustaining("a", 5))
    await mint(c.deps, body("d1"))
    await mint(c.deps, body("d2"))
    assert (last_decision(c).account_id, skipped(last_decision(c))) == (
        "b",
        [("a", "lease-capacity-exhausted")],
    )


async def test_a_quota_without_a_measured_spend_bounds_only_by_what_remains_now() -> None:
    c = await with_quotas(control(account("a"), account("b")), sustaining("a", 1), rated=False)
    for n in range(4):
        await mint(c.deps, body(f"d{n}"))
        assert last_decision(c).account_id == "a"


async def test_the_reservation_holds_the_quota_ceiling_under_its_lock() -> None:
    """Selection's count is advisory: a mint that read stale counts still cannot commit past
    the quota's ceiling, and records the pass-over as `quota-exhausted`."""
    c = await with_quotas(control(account("a"), account("b")), sustaining("a", 1))
    first, second = await asyncio.gather(mint(c.deps, body("d1")), mint(c.deps, body("d2")))
    assert sorted([first.view.account_id, second.view.account_id]) == ["a", "b"]
    onto_b = next(d for d in c.store.decisions.values() if d.account_id == "b")
    assert skipped(onto_b) == [("a", "quota-exhausted")]


async def test_declared_limits_bound_an_account_nothing_was_learned_of() -> None:
    """rpm 120 and tpm 120,000 sustain two leases of one 1,000-token request a second."""
    limited = replace(account("a"), limits={SERVED: DeclaredLimits(rpm=120, tpm=120_000)})
    c = control(limited, account("b"))
    c.deps = replace(c.deps, lease_rates=FixedRates({("a", SERVED): ONE_LEASE}))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(3)]
    assert placed == ["a", "a", "b"]
    assert skipped(last_decision(c)) == [("a", "quota-exhausted")]


async def test_before_any_spend_is_measured_the_default_prior_bounds_a_known_quota() -> None:
    """Nothing measured yet: a lease is assumed to send one request of 1,256 tokens a second
    (`default_prior(1.0)`: the setting `lease_prior_requests_per_s` 1). `a` refills 3
    requests and 3,000 tokens a second: two such leases, so the third mint goes to the next
    account."""
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 3), sustaining("b", 5), rated=False
    )
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_prior=default_prior(1.0)))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(3)]
    assert placed == ["a", "a", "b"]
    assert skipped(last_decision(c)) == [("a", "quota-exhausted")]


async def test_an_unmeasured_pair_is_bounded_by_what_the_pools_measured_leases_spend() -> None:
    """`a` was never measured; `b`'s leases spend ONE_LEASE each: `a` is taken to spend the
    same, so its quota, sustaining three such leases, takes three."""
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 3), sustaining("b", 9)
    )
    c.deps = replace(c.deps, lease_rates=FixedRates({("b", SERVED): ONE_LEASE}))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(4)]
    assert placed == ["a", "a", "a", "b"]


async def test_a_pair_nothing_is_known_of_takes_a_few_leases_then_the_rest_spread() -> None:
    """No quota learned or declared (a measured spend does not lift the probe): each account
    takes `lease_probe` leases (2 here) in pool order; past every probe a mint goes to the
    probed account holding the fewest (never a refusal of the probe's own); a pair whose
    quota is known, or one an operator sized, is not probed."""
    c = control(account("a"), account("b"), account("c", lease_capacity=9))
    rates = FixedRates({("a", SERVED): ONE_LEASE, ("b", SERVED): ONE_LEASE})
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_probe=2), lease_rates=rates)
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(4)]
    assert placed == ["a", "a", "b", "b"]
    placed = [(await mint(c.deps, body(f"e{n}"))).view.account_id for n in range(4)]
    assert placed == ["c", "c", "c", "c"]  # `c` is sized by its operator: no probe
    c.deps = replace(c.deps, registry=Registry((account("a"), account("b"))))
    placed = [(await mint(c.deps, body(f"f{n}"))).view.account_id for n in range(3)]
    assert placed == ["a", "b", "a"]
    store = InProcessQuotaStore()  # `b`'s first answer said its quota: no longer probed
    await store.learn([sustaining("b", 9)], NOW)
    c.deps = replace(c.deps, quota=store)
    await mint(c.deps, body("g"))
    assert last_decision(c).account_id == "b"


async def test_the_spreading_share_gives_way_when_nobody_else_has_room() -> None:
    """`a` sustains 5 leases, `b` 2; at a spreading share of 0.6 the walk fills `a` to 3 and
    `b` to 1, then (nobody under its share) places past the share, in pool order, up to the
    whole ceilings; the whole ceilings full, the mint is refused."""
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 5), sustaining("b", 2)
    )
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_spread=0.6))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(7)]
    assert placed == ["a", "a", "a", "b", "a", "a", "b"]
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body("d7"))
    assert caught.value.code == "no-eligible-account"


async def test_a_session_fills_its_account_past_the_spreading_share_to_the_whole_ceiling() -> None:
    """`a` sustains 4 leases; at a spreading share of 0.5 a walk moves on after 2, but the
    dispatches of one session follow their affinity to `a` until its whole ceiling is held;
    then the walk, past it, places the next on `b`."""
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 4), sustaining("b", 4)
    )
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_spread=0.5))
    placed = []
    for n in range(5):
        minted = await mint(c.deps, body(f"d{n}", affinity="session-7"))
        placed.append((minted.view.account_id, minted.view.affinity_hit))
    assert placed == [("a", False), ("a", True), ("a", True), ("a", True), ("b", False)]
    assert skipped(last_decision(c)) == [("a", "quota-exhausted")]


async def test_concurrent_mints_spread_as_a_lone_one_does() -> None:
    """Four mints at once, nothing known of either account: the probe (2) is held under the
    reservation's lock, so they do not all see an empty first account and land there."""
    c = control(account("a"), account("b"))
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_probe=2))
    minted = await asyncio.gather(*(mint(c.deps, body(f"d{n}")) for n in range(4)))
    assert sorted(m.view.account_id for m in minted) == ["a", "a", "b", "b"]


async def test_an_account_whose_provider_never_states_its_quota_is_not_probed() -> None:
    """Gemini sends no rate-limit headers: nothing would ever lift a probe there."""
    quiet = replace(account("g"), provider="gemini")
    c = control(quiet, account("b"))
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_probe=1))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(3)]
    assert placed == ["g", "g", "g"]


async def test_a_pair_that_answered_without_headers_is_not_probed() -> None:
    """The proxies told the store `a` answers without rate-limit headers (an empty
    statement): nothing more will be learned of it, and the pool's order holds again."""
    silent = Quota("a", SERVED, {}, "headers", NOW)
    c = await with_quotas(control(account("a"), account("b")), silent, rated=False)
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_probe=1))
    placed = [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(3)]
    assert placed == ["a", "a", "a"]


async def test_concurrent_mints_past_the_spreading_share_never_pass_the_whole_ceilings() -> None:
    """Twenty mints at once on a pool whose quotas are known (`a` sustains 5, `b` 2, a
    spreading share of 0.6): a mint that loses the race for `a` at its share, and finds
    nobody else with room, is placed past the share within the whole ceilings, never past
    them (the probe's unbounded overflow is for pairs nothing is known of)."""
    c = await with_quotas(
        control(account("a"), account("b")), sustaining("a", 5), sustaining("b", 2)
    )
    c.deps = replace(c.deps, limits=replace(c.deps.limits, lease_spread=0.6, lease_probe=4))
    answers = await asyncio.gather(
        *(mint(c.deps, body(f"d{n}")) for n in range(20)), return_exceptions=True
    )
    placed = [a.view.account_id for a in answers if not isinstance(a, BaseException)]
    refused = [a for a in answers if isinstance(a, BaseException)]
    assert (placed.count("a"), placed.count("b")) == (5, 2)
    assert all(isinstance(r, GatewayError) for r in refused)
    assert {r.code for r in refused if isinstance(r, GatewayError)} == {"no-eligible-account"}


@pytest.mark.parametrize("remembered", [True, False])
async def test_a_nearly_full_bucket_keeps_the_refill_an_informative_answer_showed(
    remembered: bool,
) -> None:
    """`a` refills 4 requests a second. Drained to 8 of 40, its headers say full in 8 s: four
    leases of ONE_LEASE. Nearly full (39 of 40, full in 0.25 s, said as 1 s: Anthropic's
    reset is in whole seconds), they say one a second: one lease. Mints read the
    quota through the refill memory (`control_plane.refills`) keep four; read raw, the
    account with room would take one and the rest go down the pool."""
    store = InProcessQuotaStore()
    c = control(account("a"), account("b"))
    quotas = RefillInformedQuotas(store) if remembered else store
    rates = FixedRates({("a", SERVED): ONE_LEASE, ("b", SERVED): ONE_LEASE})
    c.deps = replace(c.deps, quota=quotas, lease_rates=rates)
    drained = Quota("a", SERVED, {"requests": Bucket(40, 8, NOW + 8)}, "headers", NOW)
    await store.learn([drained], NOW)
    placed = [(await mint(c.deps, body("d0"))).view.account_id]
    c.clock.advance(20)
    later = NOW + 20
    nearly_full = Quota("a", SERVED, {"requests": Bucket(40, 39, later + 1)}, "headers", later)
    await store.learn([nearly_full], later)
    placed += [(await mint(c.deps, body(f"d{n}"))).view.account_id for n in range(1, 5)]
    assert placed == (["a", "a", "a", "a", "b"] if remembered else ["a", "b", "b", "b", "b"])
