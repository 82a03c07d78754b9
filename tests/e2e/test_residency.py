"""Data residency through real HTTP and the real stores: a tenant LEASEGATE_TENANT_RESIDENCY
restricts to Bedrock in eu-central-1 is never given the `anthropic` account first in the pool;
the pass-over says `residency` in the mint's answer and in `GET /decisions`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leasegate.client import GatewayRefusal
from tests.fixtures.pool import TENANT, Pool, two_upstream_pool
from tests.fixtures.services import StoresEnv

EU_BEDROCK = {"provider": "bedrock", "region": "eu-central-1"}
RESIDENCY = {TENANT: {"allowed_providers": ["bedrock"], "allowed_regions": ["eu-central-1"]}}


@pytest.fixture
async def pool(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Pool]:
    """`claude-a` (anthropic) first, `claude-b` on Bedrock in eu-central-1 (its API key)."""
    async with two_upstream_pool(
        tmp_path,
        stores_env,
        extra={"LEASEGATE_TENANT_RESIDENCY": json.dumps(RESIDENCY)},
        accounts_extra={"claude-b": EU_BEDROCK},
    ) as running:
        yield running


async def test_a_tenant_kept_in_eu_bedrock_never_gets_the_first_anthropic_account(
    pool: Pool,
) -> None:
    for n in range(3):
        minted = await pool.control.mint(TENANT, f"d-{n}", "claude-x")
        assert minted.account_id == "claude-b"
        assert [(p.account_id, p.code) for p in minted.passed_over] == [("claude-a", "residency")]
    (decision,) = await pool.control.decisions(TENANT, "d-0")
    assert [(p.account_id, p.code) for p in decision.passed_over] == [("claude-a", "residency")]
    other = await pool.control.mint("other", "d-0", "claude-x")  # not restricted
    assert other.account_id == "claude-a"


async def test_a_mint_may_not_widen_its_tenants_residency(pool: Pool) -> None:
    with pytest.raises(GatewayRefusal) as refused:
        await pool.control.mint(TENANT, "d-w", "claude-x", allowed_providers=["anthropic"])
    assert (refused.value.status, refused.value.code) == (400, "invalid-request")
    narrowed = await pool.control.mint(TENANT, "d-n", "claude-x", allowed_regions=["eu-central-1"])
    assert narrowed.account_id == "claude-b"
    (decision,) = await pool.control.decisions(TENANT, "d-n")
    assert decision.allowed_regions == ("eu-central-1",)
