"""The store against a reference model: random sequences of mints, revocations, renewals,
disables and the passage of time end every lease exactly once and never over-fill an account."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from leasegate.core.ports.storage import DispatchLeaseHeld, KeyNotLive, LeaseCapacityExhausted
from leasegate.core.records import KeyRecord
from leasegate.db import Store
from leasegate.db.models import Base
from tests.fixtures.storage import T0, minted

CAPACITY = 2
TTL = timedelta(seconds=60)
ACCOUNTS = ("acct-a", "acct-b")

Op = tuple[str, int, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("mint"), st.integers(0, 3), st.integers(0, 1)),
        st.tuples(st.just("revoke"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("renew"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("disable"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("tick"), st.integers(1, 40), st.just(0)),
    ),
    max_size=30,
)


@dataclass
class Model:
    now: datetime = T0
    keys: list[KeyRecord] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)

    def live(self, key: KeyRecord) -> bool:
        return key.key_id not in self.ended and self.now < key.expires_at

    def live_count(self, account_id: str) -> int:
        return sum(1 for k in self.keys if k.account_id == account_id and self.live(k))

    def dispatch_held(self, dispatch_id: str) -> bool:
        return any(k.dispatch_id == dispatch_id and self.live(k) for k in self.keys)


async def _mint(store: Store, model: Model, dispatch: int, account: int) -> None:
    decision, key = minted(
        dispatch_id=f"d-{dispatch}", account_id=ACCOUNTS[account], at=model.now, ttl=TTL
    )
    held = model.dispatch_held(key.dispatch_id)
    full = model.live_count(key.account_id) >= CAPACITY
    try:
        await store.commit_mint(decision, key, lease_capacity=CAPACITY, now=model.now)
    except DispatchLeaseHeld:
        assert held
        return
    except LeaseCapacityExhausted:
        assert full
        assert not held
        return
    assert not held
    assert not full
    model.keys.append(key)


async def _renew(store: Store, model: Model, old: KeyRecord) -> None:
    decision, new = minted(
        dispatch_id=old.dispatch_id,
        account_id=old.account_id,
        at=model.now,
        ttl=TTL,
        kind="renewal",
    )
    was_live = model.live(old)
    try:
        await store.renew_key(old.key_id, decision, new, lease_capacity=CAPACITY, now=model.now)
    except KeyNotLive:
        assert not was_live
        return
    assert was_live
    model.ended.add(old.key_id)
    model.keys.append(new)


async def _apply(store: Store, model: Model, op: Op) -> None:
    kind, a, b = op
    if kind == "mint":
        await _mint(store, model, a, b)
    elif kind == "tick":
        model.now += timedelta(seconds=a)
    elif kind == "disable":
        ended = await store.revoke_account_keys(ACCOUNTS[a], "account-disabled", model.now)
        expected = {k.key_id for k in model.keys if k.account_id == ACCOUNTS[a] and model.live(k)}
        assert {k.key_id for k in ended} == expected
        model.ended |= expected
    elif model.keys:
        key = model.keys[a % len(model.keys)]
        if kind == "renew":
            await _renew(store, model, key)
        else:
            _, ended_now = await store.revoke_key(key.key_id, "revoked", model.now)
            assert ended_now == model.live(key)
            model.ended.add(key.key_id)


async def _run(url: str, sequence: list[Op]) -> None:
    store = Store.connect(url)
    try:
        async with store.db.session() as session:
            for table in reversed(Base.metadata.sorted_tables):
                await session.execute(table.delete())
        model = Model()
        for op in sequence:
            await _apply(store, model, op)
            counts = await store.live_lease_counts(ACCOUNTS, model.now)
            assert counts == {a: model.live_count(a) for a in ACCOUNTS}
            assert all(count <= CAPACITY for count in counts.values())
    finally:
        await store.close()


@settings(max_examples=25, deadline=None)
@given(sequence=ops)
def test_the_store_behaves_like_the_model(migrated_url: str, sequence: list[Op]) -> None:
    asyncio.run(_run(migrated_url, sequence))
