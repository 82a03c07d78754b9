from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.services import StoresEnv


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
        async with in_process_gateway(env, [upstream]) as gw:
            yield gw
