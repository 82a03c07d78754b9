"""The admin overlay over real HTTP, in embedded (SQLite) and production (Postgres + Redis)
mode: state changes by admin token, revocation on disable, draining, stale revisions, the
fold of states a newer build wrote, and a corrupt chain holding every mint."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import text

from leasegate.control_plane.overlay import AdminOverlay, StateChange
from leasegate.core.clock import SystemClock
from leasegate.db import Database
from leasegate.db.audit import AuditRepository
from leasegate.kv.witness_memory import InProcessAuditWitness
from tests.fixtures.gateways import ADMIN_TOKEN, Gateway

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def set_state(
    gateway: Gateway,
    state: str,
    revision: int,
    account: str = "openai-main",
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> httpx.Response:
    body = {"state": state, "expected_revision": revision, "reason": "test", **extra}
    return await gateway.client.post(
        f"{gateway.url}/control/v2/accounts/{account}/state", json=body, headers=headers or ADMIN
    )


async def refused_code(gateway: Gateway, key: str) -> str:
    """The proxy's refusal of `key`, allowing the fan-out a moment to arrive (production)."""
    for _ in range(40):
        response = await gateway.chat(key)
        if response.status_code != 200:
            code: str = response.json()["error"]["code"]
            return code
        await asyncio.sleep(0.05)
    raise AssertionError("the proxy kept serving the key")


async def test_disable_revokes_live_keys_and_stops_mints(gateway: Gateway) -> None:
    minted = await gateway.minted()
    assert (await gateway.chat(minted["key"])).status_code == 200

    changed = await set_state(gateway, "disabled", 0, on_behalf_of="dash:bob")

    assert changed.status_code == 200, changed.text
    view = changed.json()
    assert (view["admin_state"], view["revision"], view["chain"]) == ("disabled", 1, "ok")
    assert view["revoked_keys"] == 1
    assert await refused_code(gateway, minted["key"]) in {"key-revoked", "account-disabled"}
    assert (await gateway.control_get(f"/keys/{minted['key_id']}"))["state"] == "revoked"
    again = await gateway.mint(dispatch_id="d-2")
    assert again.status_code == 503
    assert again.json()["error"]["code"] == "no-eligible-account"
    assert again.json()["error"]["passed_over"] == [
        {"account_id": "openai-main", "code": "administratively-disabled"}
    ]
    audit = await gateway.control_get("/audit")
    assert (audit["chain"], audit["revision"], audit["first_bad_seq"]) == ("ok", 1, None)
    record = audit["records"][0]
    assert record["actor"] == "ops-alice"  # the admin token's name, never a body field
    assert record["authenticated_by"] == "admin-token"
    assert record["on_behalf_of"] == "dash:bob"
    assert (record["account_id"], record["state"], record["revoked_keys"]) == (
        "openai-main",
        "disabled",
        1,
    )


async def test_a_stale_revision_conflicts_and_revokes_nothing(gateway: Gateway) -> None:
    minted = await gateway.minted()
    assert (await set_state(gateway, "draining", 0, account="claude-main")).status_code == 200

    stale = await set_state(gateway, "disabled", 0)

    assert stale.status_code == 409
    error = stale.json()["error"]
    assert (error["code"], error["revision"]) == ("revision-conflict", 1)
    assert (await gateway.chat(minted["key"])).status_code == 200
    view = await gateway.control_get("/accounts/openai-main")
    assert (view["admin_state"], view["revision"]) == ("enabled", 1)


async def test_only_admin_tokens_change_state(gateway: Gateway) -> None:
    forbidden = await set_state(gateway, "disabled", 0, headers=gateway.control_headers)
    assert forbidden.status_code == 403
    assert forbidden.json()["error"]["code"] == "forbidden"
    unauthenticated = await set_state(gateway, "disabled", 0, headers={"Authorization": "x"})
    assert unauthenticated.status_code == 401
    unknown = await set_state(gateway, "disabled", 0, account="nope")
    assert unknown.status_code == 404
    bad = await set_state(gateway, "paused", 0)
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid-request")
    assert (await gateway.control_get("/audit"))["revision"] == 0


async def test_draining_stops_new_mints_and_lets_live_keys_run(gateway: Gateway) -> None:
    minted = await gateway.minted()

    drained = await set_state(gateway, "draining", 0)

    assert drained.status_code == 200, drained.text
    assert drained.json()["revoked_keys"] == 0
    assert (await gateway.chat(minted["key"])).status_code == 200
    refused = await gateway.mint(dispatch_id="d-2")
    assert refused.json()["error"]["passed_over"][0]["code"] == "administratively-draining"
    renewal = await gateway.client.post(
        f"{gateway.url}/control/v2/keys/{minted['key_id']}/renew", headers=gateway.control_headers
    )
    assert (renewal.status_code, renewal.json()["error"]["code"]) == (
        409,
        "administratively-draining",
    )
    assert (await set_state(gateway, "enabled", 1)).status_code == 200
    assert (await gateway.mint(dispatch_id="d-2")).status_code == 201


async def test_a_state_this_build_does_not_know_folds_as_disabled(gateway: Gateway) -> None:
    # A newer build appended a state this one has never heard of.
    db = Database.connect(gateway.env["LEASEGATE_DATABASE_URL"])
    writer = AdminOverlay(AuditRepository(db), InProcessAuditWitness(), None, SystemClock())
    try:
        await writer.mutate(
            StateChange(
                account_id="openai-main",
                state="suspended",
                expected_revision=0,
                reason="newer",
                actor="ops-x",
                on_behalf_of=None,
            )
        )
    finally:
        await db.dispose()

    view = await gateway.control_get("/accounts/openai-main")
    assert (view["admin_state"], view["chain"], view["revision"]) == ("disabled", "ok", 1)
    refused = await gateway.mint()
    assert refused.json()["error"]["passed_over"] == [
        {"account_id": "openai-main", "code": "administratively-disabled"}
    ]


async def test_a_corrupt_chain_holds_every_mint_and_mutation(gateway: Gateway) -> None:
    assert (await set_state(gateway, "draining", 0, account="claude-main")).status_code == 200
    assert (await set_state(gateway, "enabled", 1, account="claude-main")).status_code == 200
    minted = await gateway.minted(dispatch_id="d-0")
    await _delete_record(gateway.env["LEASEGATE_DATABASE_URL"], seq=1)

    held = await gateway.mint()
    assert held.status_code == 503
    error = held.json()["error"]
    assert (error["code"], error["disposition"]) == ("account-state-unavailable", "held")
    assert error["mint_decision_id"].startswith("md_")
    renewal = await gateway.client.post(
        f"{gateway.url}/control/v2/keys/{minted['key_id']}/renew", headers=gateway.control_headers
    )
    assert (renewal.status_code, renewal.json()["error"]["code"]) == (
        503,
        "account-state-unavailable",
    )
    refused = await set_state(gateway, "disabled", 1)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "audit-chain-corrupt"
    ready = await gateway.client.get(f"{gateway.url}/readyz")
    assert ready.status_code == 200  # operators must still reach the admin API
    assert ready.json()["audit_chain"] == {"chain": "corrupt", "revision": 1, "first_bad_seq": 1}
    audit = await gateway.control_get("/audit")
    assert (audit["chain"], audit["first_bad_seq"], audit["problem"]) == (
        "corrupt",
        1,
        "sequence-gap",
    )
    accounts = await gateway.control_get("/accounts")
    assert accounts["chain"] == "corrupt"
    assert {a["admin_state"] for a in accounts["accounts"]} == {"unknown"}


async def _delete_record(url: str, seq: int) -> None:
    """The database owner's deliberate act: switch off the append-only guard, delete."""
    db = Database.connect(url)
    try:
        async with db.engine.begin() as connection:
            if db.dialect == "postgresql":
                await connection.execute(text("ALTER TABLE audit_records DISABLE TRIGGER USER"))
            else:
                await connection.execute(text("DROP TRIGGER audit_records_no_delete"))
            await connection.execute(
                text("DELETE FROM audit_records WHERE seq = :seq"), {"seq": seq}
            )
    finally:
        await db.dispose()
