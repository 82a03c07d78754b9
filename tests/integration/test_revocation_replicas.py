"""A revoked key is refused by every proxy replica (SPEC §5 invariant 5), in production mode:
one control-plane process and two proxy processes sharing Postgres and Redis, once on a single
Redis and once on a three-master Redis Cluster (`redis+cluster://`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import run_migrate, start_processes
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.slow, pytest.mark.serial]


@pytest.fixture(params=["redis", "redis-cluster"])
async def production_env(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, str], MockUpstream]]:
    async with production_stores() as stores, MockUpstream() as upstream:
        redis_url = stores["redis_url"]
        if request.param == "redis-cluster":
            redis_url = request.getfixturevalue("redis_cluster_url")
        # a request ceiling, so every proxied call also takes and returns a slot in the store
        account = account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"}, request_capacity=4)
        env = gateway_env(
            tmp_path,
            [account],
            database_url=stores["database_url"],
            redis_url=redis_url,
            redis_prefix=stores["redis_prefix"],
        )
        await run_migrate(env)
        yield env, upstream


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
        control, proxy_a, proxy_b = (
            process.url
            for process in await start_processes(stack, env, ["control-plane", "proxy", "proxy"])
        )
        auth = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
        async with local_client(timeout=10) as client:
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
