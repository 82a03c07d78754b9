"""Revoke racing expiry racing disable on one key: its lease comes back exactly once (SPEC §5
invariant 2), on SQLite and Postgres.

Expiry is not a write: a key stops counting when `expires_at` passes. Revocations stamped
before that moment race each other (one conditional UPDATE wins); those stamped at or after it
find the key already ended by expiry and change nothing. Whatever the interleaving, one slot
comes back: afterwards a ceiling of one admits exactly one new lease. `revoke_account_keys` is
the disable path's seam (the admin overlay calls it inside its mutation).
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import timedelta
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leasegate.core.ports.storage import LeaseCapacityExhausted
from leasegate.db import Store
from tests.fixtures.storage import T0, minted

TTL = timedelta(seconds=10)
EXPIRY = T0 + TTL
Ender = tuple[Literal["revoke", "disable"], int]

# Each path that ends a key, stamped up to 3 s either side of the key's expiry.
ENDERS = st.lists(
    st.tuples(st.sampled_from(["revoke", "disable"]), st.integers(min_value=-3, max_value=3)),
    min_size=1,
    max_size=8,
)


async def _end(store: Store, account_id: str, key_id: str, ender: Ender) -> int:
    """How many keys this call ended."""
    path, offset_s = ender
    at = EXPIRY + timedelta(seconds=offset_s)
    if path == "revoke":
        _record, ended = await store.revoke_key(key_id, "revoked", at)
        return int(ended)
    return len(await store.revoke_account_keys(account_id, "account-disabled", at))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(enders=ENDERS)
async def test_revoke_expiry_and_disable_racing_release_one_lease(
    store: Store, enders: list[Ender]
) -> None:
    account_id = f"acct-{secrets.token_hex(4)}"  # a fresh account per example
    decision, key = minted(account_id=account_id, ttl=TTL)
    await store.commit_mint(decision, key, lease_capacity=1, now=T0)
    assert await store.live_lease_counts([account_id], T0) == {account_id: 1}

    ended = await asyncio.gather(*(_end(store, account_id, key.key_id, e) for e in enders))

    revoked_in_time = any(offset_s < 0 for _, offset_s in enders)
    assert sum(ended) == (1 if revoked_in_time else 0)  # else expiry alone ended it
    after = await store.get_key(key.key_id)
    assert after is not None
    later = EXPIRY + timedelta(seconds=4)
    assert after.state(later) == ("revoked" if revoked_in_time else "expired")
    assert await store.live_lease_counts([account_id], later) == {account_id: 0}
    # Exactly one slot came back: a ceiling of one admits one new lease, not two.
    await store.commit_mint(*minted(account_id=account_id, at=later), lease_capacity=1, now=later)
    with pytest.raises(LeaseCapacityExhausted):
        await store.commit_mint(
            *minted(account_id=account_id, at=later), lease_capacity=1, now=later
        )
