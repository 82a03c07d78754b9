"""`ControlClient` (sync, run in a thread: the gateway serves from this test's loop) and
`AsyncControlClient` through real HTTP: typed results, and the one error tree carrying the
envelope's status, code, disposition, retry_after_s, passed_over and mint_decision_id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import pytest

from leasegate.client import (
    Budget,
    ControlClient,
    ControlUnreachable,
    GatewayRefusal,
    Held,
    Rejected,
)
from leasegate.demo.upstream import Reply
from tests.fixtures.gateways import ADMIN_TOKEN, CONTROL_TOKEN
from tests.fixtures.pool import TENANT, Pool, two_upstream_pool
from tests.fixtures.servers import free_port
from tests.fixtures.services import StoresEnv


@pytest.fixture
def mode() -> str:
    return "embedded"


@pytest.fixture
async def pool(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Pool]:
    async with two_upstream_pool(tmp_path, stores_env) as running:
        yield running


async def test_the_async_client_reads_what_it_minted(pool: Pool) -> None:
    control = pool.control
    minted = await control.mint(TENANT, "d-1", "gpt-4o", role="implementer", idempotency_key="a/1")
    assert minted.key is not None
    assert minted.key.startswith("lg_")
    assert (minted.account_id, minted.served_model, minted.hop, minted.replayed) == (
        "primary",
        "gpt-4o-a",
        0,
        False,
    )
    replay = await control.mint(TENANT, "d-1", "gpt-4o", role="implementer", idempotency_key="a/1")
    assert (replay.key, replay.replayed, replay.mint_decision_id) == (
        None,
        True,
        minted.mint_decision_id,
    )

    key = await control.get_key(minted.key_id)
    assert (key.state, key.dispatch_id, key.expires_at) == ("live", "d-1", minted.expires_at)
    decision = await control.decision(minted.mint_decision_id)
    assert (decision.kind, decision.outcome, decision.role) == ("fresh", "selected", "implementer")
    accounts = await control.accounts()
    assert [a.id for a in accounts.accounts] == ["primary", "backup", "claude-a", "claude-b"]
    primary = accounts.get("primary")
    assert primary is not None
    assert (primary.leases_held, primary.health, primary.configured) == (1, "healthy", True)
    one = await control.account("backup")
    assert [a.id for a in one.accounts] == ["backup"]

    pool.primary_script.reply = Reply(status=429)
    await pool.gateway.chat(minted.key)
    (row,) = await pool.gateway.evidence_for(minted.mint_decision_id)
    rows = await control.evidence(decision_id=minted.mint_decision_id)
    assert [(r.request_id, r.upstream_status, r.qualifying) for r in rows] == [
        (row["request_id"], 429, True)
    ]

    renewed = await control.renew(minted.key_id)
    assert (renewed.account_id, renewed.hop) == ("primary", 0)
    assert (await control.get_key(minted.key_id)).state == "revoked"
    await control.revoke(renewed.key_id)
    await control.revoke(renewed.key_id)  # idempotent
    listed = await control.decisions(TENANT, "d-1")
    assert [d.kind for d in listed] == ["fresh", "renewal"]
    assert listed[1].renews_mint_decision_id == minted.mint_decision_id


async def test_refusals_are_typed_from_the_envelope(pool: Pool) -> None:
    control = pool.control
    live = await control.mint(TENANT, "d-1", "gpt-4o")

    with pytest.raises(Held) as held:
        await control.mint(TENANT, "d-1", "gpt-4o")
    assert (held.value.status, held.value.code, held.value.disposition) == (
        409,
        "dispatch-lease-held",
        "held",
    )
    assert held.value.mint_decision_id is not None

    with pytest.raises(Held) as early:
        await control.mint(TENANT, "d-1", "gpt-4o", retry_of_mint_decision_id=live.mint_decision_id)
    assert (early.value.status, early.value.code) == (503, "fallback-lease-still-held")
    assert early.value.retry_after_s == 1.0

    with pytest.raises(Rejected) as unknown:
        await control.mint(TENANT, "d-2", "no-such-model")
    assert (unknown.value.status, unknown.value.code) == (404, "model-not-served")

    with pytest.raises(Rejected) as missing:
        await control.get_key("k_nothing")
    assert missing.value.code == "key-not-found"

    await control.revoke(live.key_id)
    pool.primary_script.reply = Reply(status=429)
    solo = await control.mint(TENANT, "d-3", "solo")
    assert solo.key is not None
    await pool.gateway.chat(solo.key, model="solo")
    await pool.gateway.evidence_for(solo.mint_decision_id)
    await control.revoke(solo.key_id)
    with pytest.raises(Held) as nowhere:
        await control.mint(TENANT, "d-3", "solo", retry_of_mint_decision_id=solo.mint_decision_id)
    assert (nowhere.value.status, nowhere.value.code, nowhere.value.passed_over) == (
        503,
        "no-eligible-account",
        (),
    )
    assert isinstance(nowhere.value, GatewayRefusal)


async def test_the_sync_client_and_admin_state(pool: Pool) -> None:
    def run() -> tuple[str, str]:
        with ControlClient(pool.url, CONTROL_TOKEN) as control:
            minted = control.mint(TENANT, "d-9", "gpt-4o")
            state = control.get_key(minted.key_id).state
            control.revoke(minted.key_id)
            return state, control.get_key(minted.key_id).state

    assert await asyncio.to_thread(run) == ("live", "revoked")

    def admin() -> str:
        with ControlClient(pool.url, ADMIN_TOKEN) as control:
            revision = control.accounts().revision
            view = control.set_account_state(
                "backup", "draining", expected_revision=revision, reason="maintenance"
            )
            assert (view.id, view.revoked_keys, view.record.kind) == ("backup", 0, "account-state")
            return view.admin_state

    assert await asyncio.to_thread(admin) == "draining"


async def test_an_unreachable_control_plane_is_a_transport_error() -> None:
    def run() -> None:
        with ControlClient(f"http://127.0.0.1:{free_port()}", CONTROL_TOKEN) as control:
            control.accounts()

    with pytest.raises(ControlUnreachable):
        await asyncio.to_thread(run)


async def test_a_mint_from_the_client_carries_its_dispatch_budget(pool: Pool) -> None:
    budget = Budget(max_tokens=5000, max_cost=Decimal("0.25"))
    minted = await pool.control.mint(TENANT, "d-budget", "gpt-4o", budget=budget)
    assert minted.budget == budget
    assert minted.chain_id == minted.mint_decision_id
