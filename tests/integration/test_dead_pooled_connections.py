"""A control plane whose pooled Postgres connections were all terminated by the server (what a
Postgres restart or a failover does to them) answers every following call as if nothing had
happened: no 503 while Postgres is up (issue 22 item 6). Both pools are exercised: the
asyncpg `PgPool` (the mint's commit, key and decision reads) and SQLAlchemy's engine (the
audit chain read by every mint, the accounts view, `/readyz`'s ping)."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import httpx
import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.databases import PG_HOST, PG_PORT, PG_USER
from tests.fixtures.gateways import (
    CONTROL_TOKEN,
    account_entry,
    gateway_env,
    in_process_control_plane,
)
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

ROUNDS = 3
CALLS_PER_ROUND = 12


async def _terminate_backends(database: str) -> int:
    """What a restart does to every connection of `database`: the server ends them."""
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        ended = await admin.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()
    return int(ended)


async def _calls(client: httpx.AsyncClient, url: str, tag: str) -> list[httpx.Response]:
    """Mints (each then read back) and the other reads, one after another."""
    auth = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
    answers = []
    for n in range(CALLS_PER_ROUND):
        minted = await client.post(
            f"{url}/control/v2/keys",
            json={"tenant": "t", "dispatch_id": f"d-{tag}-{n}", "model": "gpt-4o"},
            headers=auth,
        )
        answers.append(minted)
        if minted.status_code == 201:
            body = minted.json()
            key_url = f"{url}/control/v2/keys/{body['key_id']}"
            answers.append(await client.get(key_url, headers=auth))
            answers.append(
                await client.get(
                    f"{url}/control/v2/decisions/{body['mint_decision_id']}", headers=auth
                )
            )
        answers.append(await client.get(f"{url}/control/v2/accounts", headers=auth))
        answers.append(await client.get(f"{url}/readyz"))
    return answers


async def test_terminated_pooled_connections_cost_no_503(tmp_path: Path) -> None:
    async with production_stores() as stores, MockUpstream() as upstream:
        account = account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})
        env = gateway_env(tmp_path, [account], **stores)
        database = stores["database_url"].rsplit("/", 1)[1]
        async with in_process_control_plane(env) as url, local_client(timeout=30) as client:
            warm = await _calls(client, url, "warm")  # both pools hold open connections
            assert {a.status_code for a in warm} <= {200, 201}, [a.text for a in warm][:3]
            failed: list[str] = []
            for round_ in range(ROUNDS):
                assert await _terminate_backends(database) > 0
                for answer in await _calls(client, url, f"r{round_}"):
                    if answer.status_code not in (200, 201):
                        failed.append(f"{answer.request.url.path} {answer.status_code}")
            assert failed == [], failed
