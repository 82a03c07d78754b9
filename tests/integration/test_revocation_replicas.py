"""A revoked key is refused by every proxy replica (SPEC §5 invariant 5), in production mode:
one control-plane process and two proxy processes sharing Postgres and Redis."""

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
from tests.fixtures.gateway import CONTROL_TOKEN, account_entry, gateway_env
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


@pytest.fixture
async def production_env(tmp_path: Path) -> AsyncIterator[tuple[dict[str, str], MockUpstream]]:
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
            yield env, upstream
        finally:
            await drop_database(database)


async def _chat(client: httpx.AsyncClient, proxy: str, key: str) -> httpx.Response:
    return await client.post(
        f"{proxy}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {key}"},
    )


async def test_revocation_reaches_both_proxy_processes(
    production_env: tuple[dict[str, str], MockUpstream],
) -> None:
    env, _ = production_env
    with ExitStack() as stack:
        control, proxy_a, proxy_b = await asyncio.gather(
            *(
                asyncio.to_thread(stack.enter_context, leasegate_process(command, env))
                for command in ("control-plane", "proxy", "proxy")
            )
        )
        auth = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
        async with httpx.AsyncClient(timeout=10) as client:
            minted = await client.post(
                f"{control}/control/v2/keys",
                json={"tenant": "t", "dispatch_id": "d-1", "model": "gpt-4o"},
                headers=auth,
            )
            assert minted.status_code == 201, minted.text
            key, key_id = minted.json()["key"], minted.json()["key_id"]
            for proxy in (proxy_a, proxy_b):  # both replicas resolve (and cache) the key
                assert (await _chat(client, proxy, key)).status_code == 200

            revoked = await client.delete(f"{control}/control/v2/keys/{key_id}", headers=auth)
            assert revoked.status_code == 204

            for proxy in (proxy_a, proxy_b):
                codes = []
                for _ in range(40):  # fan-out is asynchronous: it gets a moment (2 s at most)
                    response = await _chat(client, proxy, key)
                    codes.append(response.status_code)
                    if response.status_code == 401:
                        assert response.json()["error"]["code"] == "key-revoked"
                        break
                    await asyncio.sleep(0.05)
                assert codes[-1] == 401, f"replica {proxy} still serves a revoked key: {codes}"
                # once refused, refused for good: the deny list outlives the cache
                again = await _chat(client, proxy, key)
                assert again.status_code == 401
