from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateway import Gateway, account_entry, gateway_env, running_gateway
from tests.fixtures.services import (
    PG_HOST,
    PG_PORT,
    REDIS_URL,
    create_database,
    drop_database,
    pg_url,
    require_service,
)


@pytest.fixture(params=["embedded", "production"])
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def stores_env(mode: str) -> AsyncIterator[dict[str, str]]:
    """Database and Redis settings for the mode: SQLite and nothing, or Postgres and Redis."""
    if mode == "embedded":
        yield {}
        return
    require_service("PostgreSQL", PG_HOST, PG_PORT)
    require_service("Redis", "127.0.0.1", 6379)
    database = await create_database()
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        yield {"database_url": pg_url(database), "redis_url": REDIS_URL, "redis_prefix": prefix}
    finally:
        await drop_database(database)
        client = aioredis.from_url(REDIS_URL)
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def gateway(tmp_path: Path, stores_env: dict[str, str]) -> AsyncIterator[Gateway]:
    """One openai account serving gpt-4o (aliased) and gpt-4o-mini, one anthropic account."""
    async with MockUpstream() as upstream:
        accounts = [
            account_entry(
                "openai-main",
                upstream,
                {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini"},
            ),
            account_entry(
                "claude-main", upstream, {"claude-x": "claude-x-2026"}, provider="anthropic"
            ),
        ]
        env = gateway_env(
            tmp_path,
            accounts,
            database_url=stores_env.get("database_url"),
            redis_url=stores_env.get("redis_url"),
            redis_prefix=stores_env.get("redis_prefix"),
        )
        async with running_gateway(env, [upstream]) as gw:
            yield gw
