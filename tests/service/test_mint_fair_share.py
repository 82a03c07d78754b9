"""Fair shares of a full pool: a tenant holding its share yields the next free lease to a
tenant the full pool turned away, so one tenant's flood never starves another. In-memory
twins (the store's pool read has its own contract on both databases)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from leasegate.accounts import DeclaredLimits
from leasegate.control_plane import keys
from leasegate.control_plane.deps import Limits
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension, QuotaSource
from leasegate.kv.quota_memory import InProcessQuotaStore
from leasegate.routing.lease_ceiling import LeaseRate
from tests.fixtures.control import (
    SERVED,
    T0,
    Control,
    FixedRates,
    account,
    body,
    control,
    terminal_row,
)

BIG, SMALL = "big", "small"


def pool(a: int = 2, b: int = 2) -> Control:
    return control(account("a", lease_capacity=a), account("b", lease_capacity=b))


async def attempt(c: Control, tenant: str, dispatch_id: str) -> str:
    """The mint's answer: the account, or the refusal's code."""
    try:
        minted = await mint(c.deps, body(dispatch_id, tenant=tenant))
    except GatewayError as refused:
        return refused.code
    return minted.view.account_id


def held(c: Control, tenant: str) -> list[str]:
    live = (k for k in c.store.keys.values() if k.state(c.clock.at) == "live")
    return [k.key_id for k in live if k.tenant == tenant]


async def test_a_tenant_over_its_share_yields_the_freed_lease_to_a_starved_one() -> None:
    c = pool()
    for n in range(4):
        assert await attempt(c, BIG, f"b{n}") in ("a", "b")
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"  # the pool is full
    await keys.revoke(c.deps, held(c, BIG)[0])
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body("b4", tenant=BIG))
    assert caught.value.code == "tenant-fair-share-exceeded"
    assert (caught.value.status, caught.value.retry_after_s) == (429, 1.0)
    assert await attempt(c, SMALL, "s0") in ("a", "b")  # the freed lease went to small
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") == "tenant-fair-share-exceeded"  # small: 1 of its 2
    assert await attempt(c, SMALL, "s1") in ("a", "b")
    await keys.revoke(c.deps, held(c, BIG)[0])
    # small holds its share now: big's waiting dispatch takes the freed lease
    assert await attempt(c, BIG, "b4") in ("a", "b")
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (2, 2)


async def test_shares_are_of_what_the_leases_spend_not_of_their_count() -> None:
    """Big and small hold four leases each of an eight-lease pool; over the spend window each
    of small's leases spent a quarter of what each of big's did (short prompts, long
    thinks). Small, turned away, is below its share of what the pool spends (6.4 leases of
    8), big above its own (1.6): the lease big frees goes to small, not back to big, though
    counted in leases they hold equal shares."""
    c = pool(4, 4)
    for n in range(4):
        assert await attempt(c, BIG, f"b{n}") in ("a", "b")
        assert await attempt(c, SMALL, f"s{n}") in ("a", "b")
    for tenant, tokens in ((BIG, 4_000), (SMALL, 1_000)):
        for key_id in held(c, tenant):
            decision = c.store.decisions[c.store.keys[key_id].mint_decision_id]
            row = replace(terminal_row(decision, f"r-{key_id}", outcome="success"), output_tokens=0)
            c.store.evidence.append(replace(row, input_tokens=tokens, started_at=c.clock.at))
    assert await attempt(c, SMALL, "s4") == "no-eligible-account"  # the pool is full
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") == "tenant-fair-share-exceeded"
    assert await attempt(c, SMALL, "s4") in ("a", "b")
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (3, 5)


async def test_without_a_starved_tenant_the_pool_is_first_come_first_served() -> None:
    c = pool()
    for n in range(4):
        assert await attempt(c, BIG, f"b{n}") in ("a", "b")
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") in ("a", "b")


async def test_a_starved_tenant_counts_only_within_the_window() -> None:
    c = pool()
    for n in range(4):
        await attempt(c, BIG, f"b{n}")
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    await keys.revoke(c.deps, held(c, BIG)[0])
    c.clock.advance(3.5)  # LEASEGATE_FAIR_SHARE_WINDOW_S: 3 s by default
    assert await attempt(c, BIG, "b4") in ("a", "b")


async def test_a_pool_with_an_account_without_ceiling_never_refuses_for_fairness() -> None:
    c = control(account("a", lease_capacity=1), account("b"))
    assert await attempt(c, BIG, "b0") == "a"
    first = c.store.decisions["md_000001"]
    c.store.decisions["starved"] = replace(
        first, id="starved", tenant=SMALL, outcome="refused", refusal_code="no-eligible-account"
    )
    c.deps.saturation.refused("gpt-4o", SMALL, c.clock.at.timestamp(), 10.0)
    assert await attempt(c, BIG, "b1") == "b"
    assert c.store.pool_reads == 0  # a pool that never fills is never shared out


async def test_a_pool_not_found_full_lately_costs_no_read() -> None:
    c = pool()
    for n in range(4):
        await attempt(c, BIG, f"b{n}")
    assert c.store.pool_reads == 0  # never full: no read
    assert await attempt(c, BIG, "b4") == "no-eligible-account"  # full, for big alone
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") in ("a", "b")  # alone, it is never held back
    assert c.store.pool_reads == 1
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    assert c.store.pool_reads == 2  # refused while full lately: is small owed a lease?
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b6") == "tenant-fair-share-exceeded"
    assert c.store.pool_reads == 3


async def test_a_tenant_below_its_share_finds_the_headroom_kept_for_it() -> None:
    """Four leases; small holds one (its share is two), big three. A lease frees: big, at
    its share, leaves it free (one lease of headroom for small) though small was never
    turned away, and small's next mint takes it at once."""
    c = pool()
    assert await attempt(c, SMALL, "s0") in ("a", "b")
    for n in range(3):
        await attempt(c, BIG, f"b{n}")
    assert await attempt(c, BIG, "b3") == "no-eligible-account"  # the pool was full lately
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") == "tenant-fair-share-exceeded"
    assert await attempt(c, SMALL, "s1") in ("a", "b")


async def test_a_pool_bounded_by_its_quotas_alone_is_shared_out_too() -> None:
    """No `lease_capacity` anywhere: rpm 120 / tpm 120,000 sustain two leases of one
    1,000-token request a second on each account, four in the pool."""
    declared = {SERVED: DeclaredLimits(rpm=120, tpm=120_000)}
    c = control(replace(account("a"), limits=declared), replace(account("b"), limits=declared))
    rate = LeaseRate(1.0, 800.0, 200.0)
    rates = {("a", SERVED): rate, ("b", SERVED): rate}
    c.deps = replace(c.deps, lease_rates=FixedRates(rates))
    for n in range(4):
        assert await attempt(c, BIG, f"b{n}") in ("a", "b")
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, BIG, "b4") == "tenant-fair-share-exceeded"
    assert await attempt(c, SMALL, "s0") in ("a", "b")


async def test_weights_set_the_shares() -> None:
    c = pool(a=3, b=3)
    c.deps = replace(c.deps, limits=Limits(900, 86400, 1, tenant_shares={SMALL: 2.0}))
    for n in range(6):
        await attempt(c, BIG, f"b{n}")
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    waiting = {BIG: 6, SMALL: 0}  # each tenant's dispatch asking until it is served
    for _ in range(6):  # big's keys end one by one; both ask each time, big first
        await keys.revoke(c.deps, held(c, BIG)[0])
        for tenant in (BIG, SMALL):
            if await attempt(c, tenant, f"{tenant[0]}{waiting[tenant]}") in ("a", "b"):
                waiting[tenant] += 1
    assert (len(held(c, SMALL)), len(held(c, BIG))) == (4, 2)  # two thirds and one third


async def test_a_flood_from_one_tenant_leaves_the_other_its_share() -> None:
    """Big keeps 20 workers minting every second and each lease lives 3 s; small has 3
    workers. Without fair shares big, asking first, wins nearly every freed lease."""
    c = pool()
    ends: dict[str, float] = {}
    small_held: list[int] = []
    for _ in range(60):
        now = c.clock.at.timestamp()
        for key_id, end in list(ends.items()):
            if end <= now:
                await keys.revoke(c.deps, key_id)
                del ends[key_id]
        for tenant, workers in ((BIG, 20), (SMALL, 3)):
            for w in range(workers):
                dispatch = f"{tenant}-{w}"
                if any(c.store.keys[k].dispatch_id == dispatch for k in ends):
                    continue  # this worker holds a lease
                try:
                    minted = await mint(c.deps, body(dispatch, tenant=tenant))
                except GatewayError:
                    continue
                ends[minted.view.key_id] = now + 3
        small_held.append(len(held(c, SMALL)))
        c.clock.advance(1)
    steady = small_held[10:]
    assert min(steady) >= 2  # its equal share of four leases, every second after warm-up


async def _big_holds_an_emptied_account(
    leases: int, *, requests_per_lease: float = 1.0, emptied: bool = True
) -> Control:
    """One account whose declared quota sustains eight leases of a 1,000-token request a
    second; big takes `leases` of it, then (`emptied`) the account's answers say its bucket
    is empty (480 requests a minute: a request's room again every 0.125 s)."""
    now = T0.timestamp()
    limits: dict[QuotaDimension, Bucket] = {
        "requests": Bucket(480, 480, None, 60.0),
        "tokens": Bucket(480_000, 480_000, None, 60.0),
    }
    store = InProcessQuotaStore()
    await store.learn([Quota("a", SERVED, limits, "declared", now)], now)
    rates = FixedRates({("a", SERVED): LeaseRate(requests_per_lease, 800.0, 200.0)})
    c = control(account("a"))
    c.deps = replace(c.deps, quota=store, lease_rates=rates)
    for n in range(leases):
        assert await attempt(c, BIG, f"b{n}") == "a"
    if emptied:
        empty: dict[QuotaDimension, Bucket] = {
            "requests": Bucket(480, 0, now + 60.0),
            "tokens": Bucket(480_000, 0, now + 60.0),
        }
        await store.learn([Quota("a", SERVED, empty, "headers", now + 0.01)], now + 0.01)
    return c


async def test_a_pool_whose_bucket_ran_empty_is_shared_out_at_what_it_holds() -> None:
    """One account whose quota sustains eight leases of a 1,000-token request a second; big
    holds two when the bucket runs empty. Small is turned away (`quota-exhausted`, not a
    full pool of leases); when the bucket refills, big (holding its share of the three
    leases the pool holds with the next one) yields, and small's mint takes the room."""
    c = await _big_holds_an_emptied_account(2)
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    c.clock.advance(1.0)  # 480 requests over 60 s: room for a few again
    assert await attempt(c, BIG, "b2") == "tenant-fair-share-exceeded"
    assert await attempt(c, SMALL, "s1") == "a"
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (2, 1)


async def test_a_starved_tenant_below_its_share_takes_a_bucket_refilling_within_a_second() -> None:
    """Big holds three leases of an account whose quota sustains eight; its bucket is empty
    and refills a request in 0.125 s. Small's first mint is turned away; its next is owed a
    lease (below its share of the four-lease pool as occupied, big above its own) and is
    placed there, to wait out the refill at the proxy; big's is still refused."""
    c = await _big_holds_an_emptied_account(3)
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    assert await attempt(c, SMALL, "s1") == "a"
    assert await attempt(c, BIG, "b3") == "no-eligible-account"
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (3, 1)


async def test_an_owed_lease_goes_to_the_bucket_refilling_soonest() -> None:
    """Two emptied accounts, `a` first in the pool refilling a request every 0.125 s, `b`
    every 0.03 s (the proxy refuses an owed lease's first request until its refill): the
    lease small is owed goes to `b`, not to the pool's first account, and the next one too
    (`b` still refills sooner, with one lease more)."""
    now = T0.timestamp()
    store = InProcessQuotaStore()
    rates = FixedRates({})
    for name, rpm in (("a", 480), ("b", 2_000)):
        limits: dict[QuotaDimension, Bucket] = {
            "requests": Bucket(rpm, rpm, None, 60.0),
            "tokens": Bucket(rpm * 1_000, rpm * 1_000, None, 60.0),
        }
        await store.learn([Quota(name, SERVED, limits, "declared", now)], now)
        rates.rates[(name, SERVED)] = LeaseRate(1.0, 800.0, 200.0)
    c = control(account("a"), account("b"))
    c.deps = replace(c.deps, quota=store, lease_rates=rates)
    for n in range(6):
        assert await attempt(c, BIG, f"b{n}") in ("a", "b")
    for name, rpm in (("a", 480), ("b", 2_000)):
        empty: dict[QuotaDimension, Bucket] = {
            "requests": Bucket(rpm, 0, now + 60.0),
            "tokens": Bucket(rpm * 1_000, 0, now + 60.0),
        }
        await store.learn([Quota(name, SERVED, empty, "headers", now + 0.01)], now + 0.01)
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    assert await attempt(c, SMALL, "s1") == "b"
    assert await attempt(c, SMALL, "s2") == "b"


async def _pool_at_its_whole_ceiling(source: QuotaSource) -> Control:
    """The account above at 1.1 requests a second a lease (its quota sustains 7.3 leases,
    rounded up: eight), all eight held by big; `headers`: its answers then say its bucket is
    empty; `declared`: nothing but its declared quota is known. Big is turned away."""
    c = await _big_holds_an_emptied_account(8, requests_per_lease=1.1, emptied=source == "headers")
    assert await attempt(c, BIG, "b8") == "no-eligible-account"  # the pool is full
    return c


async def test_leases_owed_at_the_whole_ceiling_go_past_it_as_far_as_big_holds_over_its_share() -> (
    None
):
    """Big holds every lease the pool's quota sustains (eight) and is turned away for one
    more. Small asks for the first time: it is owed its share of the pool as occupied (four),
    and with the account at its whole ceiling its leases go past it, where the bucket refills
    within a second, as far as big holds beyond its own share (four): a pool one tenant
    filled is lent to the other at once instead of the other waiting for its leases to end.
    Big is held back meanwhile, so the pool comes back under its ceiling as big's leases end;
    the proxy paces the requests by the bucket. Small's fifth mint is turned away (it holds
    its share), and so is big's."""
    c = await _pool_at_its_whole_ceiling("headers")
    for n in range(4):
        assert await attempt(c, SMALL, f"s{n}") == "a"  # not turned away first
    assert await attempt(c, SMALL, "s4") == "no-eligible-account"
    assert await attempt(c, BIG, "b9") in ("no-eligible-account", "tenant-fair-share-exceeded")
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (8, 4)


async def test_a_lease_owed_never_goes_past_the_ceiling_of_a_quota_only_declared() -> None:
    """The same pool, its quota only declared (the account's answers carry no headers: the
    proxy paces its requests by the declared bucket alone, a guess of the provider's): the
    owed lease waits for one of big's to end instead of going past the ceiling."""
    c = await _pool_at_its_whole_ceiling("declared")
    assert await attempt(c, SMALL, "s0") == "no-eligible-account"
    await keys.revoke(c.deps, held(c, BIG)[0])
    assert await attempt(c, SMALL, "s0") == "a"  # the freed lease goes to small
    assert (len(held(c, BIG)), len(held(c, SMALL))) == (7, 1)
