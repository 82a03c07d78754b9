"""Admin mutations across real OS processes in production mode (Postgres + Redis): two
control planes racing the same expected_revision, and a disable reaching two proxies."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateway import ADMIN_TOKEN, CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.servers import leasegate_process
from tests.fixtures.services import (
    PG_HOST,
    PG_PORT,
    REDIS_URL,
    create_database,
    drop_database,
    pg_url,
    require_service,
)

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CONTROL = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
ROUNDS = 6


@pytest.fixture
async def production_env(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    require_service("PostgreSQL", PG_HOST, PG_PORT)
    require_service("Redis", "127.0.0.1", 6379)
    database = await create_database()
    async with MockUpstream() as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            database_url=pg_url(database),
            redis_url=REDIS_URL,
            redis_prefix=f"lgtest:{secrets.token_hex(4)}",
            extra={"LEASEGATE_AUDIT_KEY": "test-audit-key"},
        )
        migrate = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "leasegate.cli.main",
            "migrate",
            env=env,
            stdout=subprocess.DEVNULL,
        )
        assert await migrate.wait() == 0
        try:
            yield env
        finally:
            await drop_database(database)


async def _start(stack: ExitStack, env: dict[str, str], *commands: str) -> list[str]:
    return list(
        await asyncio.gather(
            *(asyncio.to_thread(stack.enter_context, leasegate_process(c, env)) for c in commands)
        )
    )


async def _set(
    client: httpx.AsyncClient, control: str, state: str, revision: int
) -> httpx.Response:
    return await client.post(
        f"{control}/control/v2/accounts/openai-main/state",
        json={"state": state, "expected_revision": revision, "reason": "race"},
        headers=ADMIN,
    )


async def test_two_control_planes_racing_one_revision_admit_exactly_one(
    production_env: dict[str, str],
) -> None:
    with ExitStack() as stack:
        control_a, control_b = await _start(stack, production_env, "control-plane", "control-plane")
        async with httpx.AsyncClient(timeout=30) as client:
            for revision in range(ROUNDS):
                a, b = await asyncio.gather(
                    _set(client, control_a, "draining", revision),
                    _set(client, control_b, "disabled", revision),
                )
                assert sorted([a.status_code, b.status_code]) == [200, 409], (a.text, b.text)
                loser = a if a.status_code == 409 else b
                assert loser.json()["error"]["code"] == "revision-conflict"
                assert loser.json()["error"]["revision"] == revision + 1

            for control in (control_a, control_b):
                audit = (await client.get(f"{control}/control/v2/audit", headers=CONTROL)).json()
                assert (audit["chain"], audit["revision"]) == ("ok", ROUNDS)
                assert [r["seq"] for r in audit["records"]] == list(range(1, ROUNDS + 1))


async def _chat(client: httpx.AsyncClient, proxy: str, key: str) -> httpx.Response:
    return await client.post(
        f"{proxy}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {key}"},
    )


async def test_disable_revokes_the_accounts_keys_on_every_proxy(
    production_env: dict[str, str],
) -> None:
    with ExitStack() as stack:
        control, proxy_a, proxy_b = await _start(
            stack, production_env, "control-plane", "proxy", "proxy"
        )
        async with httpx.AsyncClient(timeout=30) as client:
            keys = []
            for dispatch in ("d-1", "d-2"):
                minted = await client.post(
                    f"{control}/control/v2/keys",
                    json={"tenant": "t", "dispatch_id": dispatch, "model": "gpt-4o"},
                    headers=CONTROL,
                )
                assert minted.status_code == 201, minted.text
                keys.append(minted.json()["key"])
            for proxy in (proxy_a, proxy_b):  # both replicas resolve (and cache) both keys
                for key in keys:
                    assert (await _chat(client, proxy, key)).status_code == 200

            disabled = await _set(client, control, "disabled", 0)
            assert disabled.status_code == 200, disabled.text
            assert disabled.json()["revoked_keys"] == 2

            for proxy in (proxy_a, proxy_b):
                for key in keys:
                    codes = []
                    for _ in range(20):  # fan-out is asynchronous: allow it a moment, no more
                        response = await _chat(client, proxy, key)
                        codes.append(response.status_code)
                        if response.status_code != 200:
                            assert response.json()["error"]["code"] == "key-revoked"
                            break
                        await asyncio.sleep(0.05)
                    assert codes[-1] == 401, codes
                    assert len(codes) <= 3, f"replica {proxy} served a disabled key: {codes}"
