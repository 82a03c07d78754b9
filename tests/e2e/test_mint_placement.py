"""Affinity and fair shares through real HTTP and the real stores (embedded SQLite, and
Postgres, whose mint is one `leasegate_commit_mint` call that must store the new fields):
the typed client sends `affinity`, the answer and `GET /decisions/{id}` carry the hit, and a
full pool's flooding tenant is held to leave a starved tenant its lease."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leasegate.client import GatewayRefusal
from tests.fixtures.pool import TENANT, Pool, two_upstream_pool
from tests.fixtures.services import StoresEnv

CEILING_ONE = {"primary": {"lease_capacity": 1}, "backup": {"lease_capacity": 1}}


@pytest.fixture
async def pool(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Pool]:
    async with two_upstream_pool(tmp_path, stores_env, accounts_extra=CEILING_ONE) as running:
        yield running


async def test_a_session_stays_on_the_account_that_served_it(pool: Pool) -> None:
    control = pool.control
    holder = await control.mint("other", "d-0", "gpt-4o")  # fills primary
    first = await control.mint(TENANT, "d-1", "gpt-4o", affinity="session-7")
    assert (first.account_id, first.affinity_hit) == ("backup", False)
    await control.revoke(holder.key_id)
    await control.revoke(first.key_id)
    # primary, first in the pool, has room again: the session still goes where it was
    second = await control.mint(TENANT, "d-2", "gpt-4o", affinity="session-7")
    assert (second.account_id, second.affinity_hit, second.passed_over) == ("backup", True, ())
    decision = await control.decision(second.mint_decision_id)
    assert (decision.affinity, decision.affinity_hit) == ("session-7", True)
    plain = await control.mint(TENANT, "d-3", "gpt-4o")
    assert (plain.account_id, plain.affinity_hit) == ("primary", False)


async def test_a_flooding_tenant_leaves_the_freed_lease_to_the_starved_one(pool: Pool) -> None:
    control = pool.control
    big = [await control.mint("big", f"b-{n}", "gpt-4o") for n in range(2)]
    with pytest.raises(GatewayRefusal) as full:
        await control.mint("small", "s-1", "gpt-4o")
    assert full.value.code == "no-eligible-account"
    await control.revoke(big[0].key_id)
    with pytest.raises(GatewayRefusal) as held:
        await control.mint("big", "b-2", "gpt-4o")
    assert (held.value.status, held.value.code) == (429, "tenant-fair-share-exceeded")
    assert (held.value.disposition, held.value.retry_after_s) == ("held", 1.0)
    assert held.value.mint_decision_id is not None
    small = await control.mint("small", "s-1", "gpt-4o")
    assert small.account_id == big[0].account_id


async def test_a_missed_affinity_is_recorded_in_a_field_of_its_own(pool: Pool) -> None:
    """The session's account is full: the mint goes to the next account with room, and the
    answer and the stored decision name the session's account and why, beside the walk's
    own `passed_over` (which skipped nothing: the next account is first in the pool)."""
    control = pool.control
    holder = await control.mint("other", "d-0", "gpt-4o")  # fills primary
    first = await control.mint(TENANT, "d-1", "gpt-4o", affinity="session-9")
    assert (first.account_id, first.affinity_miss) == ("backup", None)
    await control.revoke(holder.key_id)
    # backup, the session's account, stays full (`first` is live); primary has room
    second = await control.mint(TENANT, "d-2", "gpt-4o", affinity="session-9")
    assert (second.account_id, second.affinity_hit, second.passed_over) == ("primary", False, ())
    assert second.affinity_miss is not None
    assert (second.affinity_miss.account_id, second.affinity_miss.code) == (
        "backup",
        "lease-capacity-exhausted",
    )
    decision = await control.decision(second.mint_decision_id)
    assert decision.affinity_miss == second.affinity_miss
    await control.revoke(second.key_id)
    # the session now lives on primary, and follows it there
    hit = await control.mint(TENANT, "d-3", "gpt-4o", affinity="session-9")
    assert hit.account_id == "primary"
    assert (hit.affinity_hit, hit.affinity_miss) == (True, None)
