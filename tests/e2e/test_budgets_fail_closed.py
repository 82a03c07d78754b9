"""Budgets fail closed: a proxy that starts while the audit chain does not verify cannot tell
which tenants are budgeted, so it refuses them 503 `budgets-unverifiable` rather than serve a
budgeted tenant unmetered, and serves (and meters) again by itself once the chain verifies.

Production stores (Postgres, Redis); the database owner's tamper is an edit of the budget's
record with the append-only triggers switched off, as tests/integration/test_audit_tamper.py
does. The demo upstream reports 16 tokens per non-streaming chat.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from leasegate.db import Database
from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import ADMIN_TOKEN, account_entry, gateway_env, in_process_gateway
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

PER_REQUEST = 16
PRICES = {"input": "2.50", "output": "10.00", "cache_read": "1.25"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def owner(url: str, statement: str, **params: object) -> None:
    """What the database's owner can do: switch the append-only triggers off, edit, and on."""
    db = Database.connect(url)
    try:
        async with db.engine.begin() as connection:
            await connection.execute(text("ALTER TABLE audit_records DISABLE TRIGGER USER"))
            await connection.execute(text(statement), params)
            await connection.execute(text("ALTER TABLE audit_records ENABLE TRIGGER USER"))
    finally:
        await db.dispose()


def code_of(response: httpx.Response) -> str | None:
    if response.status_code == 200:
        return None
    return str(response.json()["error"]["code"])


async def test_a_proxy_started_on_a_corrupt_chain_refuses_until_it_verifies(
    tmp_path: Path,
) -> None:
    tenant, other = f"acme/{secrets.token_hex(3)}", f"beta/{secrets.token_hex(3)}"
    async with production_stores() as stores, MockUpstream(chunks=4) as upstream:
        priced = {"served": "gpt-4o-a", "prices": PRICES}
        env = gateway_env(
            tmp_path,
            [account_entry("primary", upstream, {"gpt-4o": priced})],  # type: ignore[dict-item]
            **stores,
            currency="USD",
        )
        async with in_process_gateway(env) as gw:
            revision = int((await gw.control_get("/accounts"))["revision"])
            answer = await gw.client.post(
                f"{gw.control_url}/control/v2/tenants/{tenant}/budget",
                json={
                    "reason": "cap",
                    "expected_revision": revision,
                    "period": "day",
                    "max_tokens": 3 * PER_REQUEST + 1,
                },
                headers=ADMIN,
            )
            assert answer.status_code == 200, answer.text
            seq = answer.json()["record"]["seq"]
            key = await gw.minted(tenant=tenant, dispatch_id="d-1")
            unbudgeted = await gw.minted(tenant=other, dispatch_id="d-1")
            for _ in range(4):  # 16, 32, 48 < 49: the fourth is admitted and crosses
                assert (await gw.chat(key)).status_code == 200
            assert code_of(await gw.chat(key)) == "tenant-budget-exhausted"

        # the owner lifts the tenant's cap in the record itself: the chain no longer verifies
        database_url = stores["database_url"]
        await owner(
            database_url, "UPDATE audit_records SET max_tokens = 10000000 WHERE seq = :s", s=seq
        )
        async with in_process_gateway(env) as gw:  # a proxy started on the corrupt chain
            refused = await gw.chat(key)
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert (error["code"], error["disposition"]) == ("budgets-unverifiable", "held")
            assert refused.headers["retry-after"] == "1"
            # nothing verified: no tenant can be cleared, budgeted or not
            assert code_of(await gw.chat(unbudgeted)) == "budgets-unverifiable"

            await owner(
                database_url,
                "UPDATE audit_records SET max_tokens = :m WHERE seq = :s",
                m=3 * PER_REQUEST + 1,
                s=seq,
            )
            started = time.monotonic()
            while code_of(await gw.chat(unbudgeted)) is not None:
                assert time.monotonic() - started < 3.0, "not served again after the repair"
                await asyncio.sleep(0.1)
            # metered again, without a restart: the tenant's spent budget is refused
            assert code_of(await gw.chat(key)) == "tenant-budget-exhausted"
