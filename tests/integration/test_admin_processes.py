"""Admin mutations across real OS processes in production mode (Postgres + Redis): two
control planes racing the same expected_revision, and a disable reaching two proxies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import ADMIN_TOKEN, CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import run_migrate, start_processes
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.slow, pytest.mark.serial]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CONTROL = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
ROUNDS = 6


@pytest.fixture
async def production_env(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    async with production_stores() as stores, MockUpstream() as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            **stores,
            extra={"LEASEGATE_AUDIT_KEY": "test-audit-key"},
        )
        await run_migrate(env)
        yield env


async def _start(stack: ExitStack, env: dict[str, str], *commands: str) -> list[str]:
    return [process.url for process in await start_processes(stack, env, commands)]


async def _set(
    client: httpx.AsyncClient, control: str, state: str, revision: int
) -> httpx.Response:
    return await client.post(
        f"{control}/control/v2/accounts/openai-main/state",
        json={"state": state, "expected_revision": revision, "reason": "race"},
        headers=ADMIN,
    )


async def _chat(client: httpx.AsyncClient, proxy: str, key: str) -> httpx.Response:
    return await client.post(
        f"{proxy}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {key}"},
    )


async def _mint(client: httpx.AsyncClient, control: str, dispatch: str) -> str:
    minted = await client.post(
        f"{control}/control/v2/keys",
        json={"tenant": "t", "dispatch_id": dispatch, "model": "gpt-4o"},
        headers=CONTROL,
    )
    assert minted.status_code == 201, minted.text
    key: str = minted.json()["key"]
    return key


async def test_racing_control_planes_admit_one_and_a_disable_reaches_every_proxy(
    production_env: dict[str, str],
) -> None:
    """One set of processes (they are slow to start) for both claims."""
    with ExitStack() as stack:
        # two at a time: four interpreters importing at once on a small, busy box can miss
        # the fixture's readiness deadline
        control_a, control_b = await _start(stack, production_env, "control-plane", "control-plane")
        proxy_a, proxy_b = await _start(stack, production_env, "proxy", "proxy")
        async with local_client(timeout=30) as client:
            # Two control planes race every revision: exactly one wins each, the other is
            # told the revision the winner made.
            for revision in range(ROUNDS):
                a, b = await asyncio.gather(
                    _set(client, control_a, "draining", revision),
                    _set(client, control_b, "enabled", revision),
                )
                assert sorted([a.status_code, b.status_code]) == [200, 409], (a.text, b.text)
                loser = a if a.status_code == 409 else b
                assert loser.json()["error"]["code"] == "revision-conflict"
                assert loser.json()["error"]["revision"] == revision + 1
            if (await _set(client, control_a, "enabled", ROUNDS)).status_code != 200:
                raise AssertionError("could not re-enable the account")

            keys = [await _mint(client, control_b, dispatch) for dispatch in ("d-1", "d-2")]
            for proxy in (proxy_a, proxy_b):  # both replicas resolve (and cache) both keys
                for key in keys:
                    assert (await _chat(client, proxy, key)).status_code == 200

            # Both control planes disable at once: one revokes both keys, the stale one
            # revokes nothing.
            a, b = await asyncio.gather(
                _set(client, control_a, "disabled", ROUNDS + 1),
                _set(client, control_b, "disabled", ROUNDS + 1),
            )
            assert sorted([a.status_code, b.status_code]) == [200, 409], (a.text, b.text)
            winner = a if a.status_code == 200 else b
            assert winner.json()["revoked_keys"] == 2

            for proxy in (proxy_a, proxy_b):
                for key in keys:
                    codes = await _refusals(client, proxy, key)
                    assert codes[-1] == 401, codes
                    assert len(codes) <= 3, f"replica {proxy} served a disabled key: {codes}"

            for control in (control_a, control_b):
                audit = (await client.get(f"{control}/control/v2/audit", headers=CONTROL)).json()
                assert (audit["chain"], audit["revision"]) == ("ok", ROUNDS + 2)
                assert [r["revoked_keys"] for r in audit["records"]][-1] == 2


async def _refusals(client: httpx.AsyncClient, proxy: str, key: str) -> list[int]:
    """Status codes until the proxy refuses `key` (fan-out is asynchronous: a moment, no more)."""
    codes = []
    for _ in range(20):
        response = await _chat(client, proxy, key)
        codes.append(response.status_code)
        if response.status_code != 200:
            assert response.json()["error"]["code"] == "key-revoked"
            break
        await asyncio.sleep(0.05)
    return codes
