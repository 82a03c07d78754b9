from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateway import Gateway, account_entry, gateway_env, running_gateway
from tests.fixtures.services import StoresEnv, production_stores


@pytest.fixture(params=["embedded", "production"])
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def stores_env(mode: str) -> AsyncIterator[StoresEnv]:
    """Database and Redis settings for the mode: SQLite and nothing, or Postgres and Redis."""
    if mode == "embedded":
        yield {}
        return
    async with production_stores() as stores:
        yield stores


@pytest.fixture
async def gateway(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
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
            **stores_env,
        )
        async with running_gateway(env, [upstream]) as gw:
            yield gw
