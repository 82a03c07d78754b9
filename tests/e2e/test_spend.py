"""Spend through real HTTP, embedded and on Postgres + Redis: every row carries its exact cost,
and a dispatch's budget is refused at the proxy once its chain has reached it, hops included.

The demo upstream reports, per non-streaming chat: prompt 12 tokens (4 of them cached),
completion 4 tokens (chunks=4): 8 uncached + 4 cached + 4 output = 16 tokens a request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.cli.main import main
from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.services import StoresEnv

PER_REQUEST = 16
PRICES = {"input": "2.50", "output": "10.00", "cache_read": "1.25"}
# 8 x 2.50 + 4 x 1.25 + 4 x 10.00 per million
COST = (8 * Decimal("2.50") + 4 * Decimal("1.25") + 4 * Decimal("10.00")) / 10**6


@dataclass
class Failing:
    """The primary's upstream: healthy until `fail` is set, then 503 on every request."""

    fail: bool = False

    def __call__(self, _: MockRequest) -> Reply | None:
        return Reply(status=503) if self.fail else None


@dataclass
class Priced:
    gateway: Gateway
    primary: Failing


@pytest.fixture
def priced_pool(
    tmp_path: Path, stores_env: StoresEnv
) -> Callable[[], AbstractAsyncContextManager[Priced]]:
    @asynccontextmanager
    async def pool() -> AsyncIterator[Priced]:
        script = Failing()
        async with MockUpstream(script, chunks=4) as primary, MockUpstream(chunks=4) as backup:
            priced = {"served": "gpt-4o-a", "prices": PRICES}
            accounts = [
                account_entry("primary", primary, {"gpt-4o": priced}),  # type: ignore[dict-item]
                account_entry("backup", backup, {"gpt-4o": "gpt-4o-b"}),
            ]
            env = gateway_env(
                tmp_path,
                accounts,
                **stores_env,
                currency="USD",
            )
            async with in_process_gateway(env, [primary, backup]) as gw:
                yield Priced(gw, script)

    return pool


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


async def test_every_row_carries_its_exact_cost_and_unpriced_models_none(
    priced_pool: Callable[[], AbstractAsyncContextManager[Priced]],
) -> None:
    async with priced_pool() as pool:
        gw = pool.gateway
        minted = await gw.minted()
        assert minted["account_id"] == "primary"
        assert (await gw.chat(minted["key"])).status_code == 200
        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert (row["input_tokens"], row["cache_read_input_tokens"], row["output_tokens"]) == (
            12,
            4,
            4,
        )
        assert Decimal(row["cost"]) == COST  # a decimal string, exact

        pool.primary.fail = True
        assert (await gw.chat(minted["key"])).status_code == 503
        await gw.evidence_for(minted["mint_decision_id"], count=2)  # the hop's licence
        await gw.revoke(minted["key_id"])
        hop = await gw.minted(retry_of_mint_decision_id=minted["mint_decision_id"])
        assert hop["account_id"] == "backup"
        assert (await gw.chat(hop["key"])).status_code == 200
        (unpriced,) = await gw.evidence_for(hop["mint_decision_id"])
        assert unpriced["output_tokens"] == 4
        assert unpriced["cost"] is None


async def test_a_budget_is_refused_once_reached_and_a_hop_spends_the_chains_remainder(
    priced_pool: Callable[[], AbstractAsyncContextManager[Priced]],
) -> None:
    async with priced_pool() as pool:
        gw = pool.gateway
        budget = {"max_tokens": 3 * PER_REQUEST + 1}  # room for a fourth request to start
        minted = await gw.minted(budget=budget)
        assert minted["budget"] == {"max_tokens": 3 * PER_REQUEST + 1, "max_cost": None}
        assert (await gw.chat(minted["key"])).status_code == 200  # 16 spent
        pool.primary.fail = True
        assert (await gw.chat(minted["key"])).status_code == 503  # no usage: nothing spent
        await gw.evidence_for(minted["mint_decision_id"], count=2)  # the hop's licence
        await gw.revoke(minted["key_id"])

        different = await gw.mint(
            retry_of_mint_decision_id=minted["mint_decision_id"], budget={"max_tokens": 10**6}
        )
        _refused(different, 400, "invalid-request")  # a hop cannot raise its chain's budget
        hop = await gw.minted(retry_of_mint_decision_id=minted["mint_decision_id"])
        assert hop["account_id"] == "backup"
        assert hop["chain_id"] == minted["chain_id"] == minted["mint_decision_id"]
        assert hop["budget"] == minted["budget"]
        for _ in range(3):  # 32, 48, 64 spent: the third starts at 48 < 49
            assert (await gw.chat(hop["key"])).status_code == 200
        refused = await gw.chat(hop["key"])
        error = _refused(refused, 402, "dispatch-budget-exhausted")
        assert error["disposition"] == "rejected"
        rows = await gw.evidence_for(hop["mint_decision_id"], count=4)
        last = rows[0]  # newest first
        assert (last["outcome"], last["refusal_reason"], last["qualifying"]) == (
            "refused",
            "dispatch-budget-exhausted",
            False,
        )
        accounts = await gw.control_get("/accounts/backup")
        assert accounts["health"] == "healthy"  # a budget refusal is never a health failure


async def test_requests_in_flight_when_the_budget_is_crossed_overshoot_it_by_at_most_their_own(
    priced_pool: Callable[[], AbstractAsyncContextManager[Priced]],
) -> None:
    async with priced_pool() as pool:
        gw = pool.gateway
        minted = await gw.minted(budget={"max_cost": "0.000001"})  # below one request's cost
        answers = await asyncio.gather(*(gw.chat(minted["key"]) for _ in range(8)))
        admitted = sum(1 for a in answers if a.status_code == 200)
        assert admitted >= 1
        assert all(a.status_code in (200, 402) for a in answers)
        rows = await gw.evidence_for(minted["mint_decision_id"], count=8)
        spent = sum(Decimal(r["cost"]) for r in rows if r["cost"] is not None)
        assert spent == admitted * COST  # the bound: what the admitted in-flight requests cost
        after = await gw.chat(minted["key"])
        _refused(after, 402, "dispatch-budget-exhausted")


async def test_usage_totals_equal_the_sum_of_evidence_rows_and_the_cli_prints_them(
    priced_pool: Callable[[], AbstractAsyncContextManager[Priced]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with priced_pool() as pool:
        gw = pool.gateway
        for dispatch, tenant in (("u-1", "acme/web"), ("u-2", "acme/api")):
            minted = await gw.minted(dispatch_id=dispatch, tenant=tenant)
            for _ in range(2):
                assert (await gw.chat(minted["key"])).status_code == 200
            await gw.evidence_for(minted["mint_decision_id"], count=2)
        report = await gw.control_get("/usage?group_by=tenant,account,model,day")
        assert report["currency"] == "USD"
        assert report["group_by"] == ["tenant", "account", "model", "day"]
        rows = (await gw.control_get("/evidence?limit=1000"))["evidence"]
        by_tenant = {g["tenant"]: g for g in report["usage"]}
        assert set(by_tenant) == {"acme/web", "acme/api"}
        for group in report["usage"]:
            assert (group["account"], group["model"], group["requests"]) == ("primary", "gpt-4o", 2)
            assert group["day"] == rows[0]["started_at"][:10]
            assert Decimal(group["cost"]) == 2 * COST
        assert sum(g["output_tokens"] for g in report["usage"]) == sum(
            r["output_tokens"] for r in rows
        )

        account = await gw.control_get("/accounts/primary")
        assert account["spend_today"]["requests"] == 4
        assert Decimal(account["spend_today"]["cost"]) == 4 * COST

        bad = await gw.client.get(
            f"{gw.url}/control/v2/usage?group_by=tenant,nope", headers=gw.control_headers
        )
        _refused(bad, 400, "invalid-request")
        naive = await gw.client.get(
            f"{gw.url}/control/v2/usage?since=2026-01-01T00:00:00", headers=gw.control_headers
        )
        _refused(naive, 400, "invalid-request")

        argv = ["usage", "--url", gw.url, "--token", gw.control_headers["Authorization"][7:]]
        assert (
            await asyncio.to_thread(main, [*argv, "--group-by", "tenant", "--format", "csv"]) == 0
        )
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("tenant,requests,input_tokens,output_tokens")
        assert sorted(lines[1:]) == sorted(
            f"{t},2,24,8,8,0,{format((2 * COST).normalize(), 'f')},0"  # none estimated
            for t in ("acme/api", "acme/web")
        )
