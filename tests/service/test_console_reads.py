"""What the console's Pool and Dispatches pages read, over in-memory twins: each read is
called with the collaborators `ConsoleDeps` hands its page (the accounts view's `AccountsDeps`,
the overlay, the decision, evidence and key rows, the revoker), built as the runtime builds
them but over the `MemoryStore`, a `MemoryChain` under a real `AdminOverlay` and the Redis
twins (`tests/fixtures/reads.py`). The pages' HTML is the e2e suites' (`test_console_*.py`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from leasegate.control_plane import keys
from leasegate.control_plane.console.pool import pool_view
from leasegate.control_plane.console.reads import dispatch_chain
from leasegate.core.ports.health import Cooldown
from tests.fixtures.control import SERVED, T0, Published, StepClock
from tests.fixtures.memory_store import MemoryStore
from tests.fixtures.reads import Reads, reads


@pytest.fixture
def r() -> Reads:
    return reads()


@dataclass(frozen=True, slots=True)
class Revoker:
    """The console's revoker (`keys.Revoking`) over the twins: the runtime hands the mint's."""

    clock: StepClock
    store: MemoryStore
    revocations: Published


async def test_the_pool_grid_shows_each_accounts_state_who_set_it_and_each_models_health(
    r: Reads,
) -> None:
    await r.operator_sets("a", "disabled")
    r.health.cooling[("b", SERVED)] = Cooldown("b", SERVED, T0.timestamp() + 60, "http-429", 2)
    await r.served("acme", "a", "r1", tokens=1, cost=None)
    pool = await pool_view(r.accounts, r.overlay)
    assert (pool.models, pool.revision, pool.chain) == ([SERVED], 1, "ok")
    a, b = pool.rows
    assert (a.account_id, a.admin_state, a.cells[SERVED].state) == ("a", "disabled", "healthy")
    assert a.changed_by is not None
    assert (a.changed_by.actor, a.changed_by.reason, a.changed_by.seq) == ("ops", "test", 1)
    assert (a.leases.used, a.requests.ceiling) == (1, 4)
    assert (b.account_id, b.admin_state, b.changed_by) == ("b", "enabled", None)
    cell = b.cells[SERVED]
    assert (cell.state, cell.reason, cell.trips) == ("cooling", "http-429", 2)
    assert [record.seq for record in pool.records] == [1]


async def test_an_account_enabled_again_no_longer_names_who_disabled_it(r: Reads) -> None:
    await r.operator_sets("a", "disabled")
    await r.operator_sets("a", "enabled")
    a, _ = (await pool_view(r.accounts, r.overlay)).rows
    assert (a.admin_state, a.changed_by) == ("enabled", None)


async def test_a_dispatch_chain_shows_each_decision_with_its_keys_life(r: Reads) -> None:
    decision = await r.served("acme", "a", "r1", tokens=1, cost=None)
    [shown] = await dispatch_chain(r.store, r.clock, "acme", decision.dispatch_id)
    assert shown["mint_decision_id"] == decision.id
    assert [e["request_id"] for e in shown["evidence"]] == ["r1"]
    assert [e.what for e in shown["key_life"]] == ["minted", "live until"]
    published = Published()
    r.clock.advance(60)
    await keys.revoke(Revoker(r.clock, r.store, published), shown["key_id"])
    [shown] = await dispatch_chain(r.store, r.clock, "acme", decision.dispatch_id)
    assert [(e.what, e.detail) for e in shown["key_life"]] == [("minted", None), ("revoked", None)]
    assert [v.key_id for v in published.revocations] == [shown["key_id"]]


async def test_an_unknown_dispatch_has_no_chain(r: Reads) -> None:
    assert await dispatch_chain(r.store, r.clock, "acme", "never-dispatched") == []
