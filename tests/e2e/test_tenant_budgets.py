"""Tenant budgets per period through real HTTP.

Two `leasegate proxy` OS processes share Postgres and Redis with a control plane: a tenant's
budget, set on the audit chain, is crossed; the mint refuses 402 held until the end of the UTC
day and both proxies refuse the tenant's live keys within a second of the crossing. A
dispatch's budget is crossed mid-chain the same way, its hop spending the remainder across
both proxies. Recovery at the period's end runs in one process with an injected clock.

The demo upstream reports 16 tokens per non-streaming chat (see test_spend.py).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.cli.main import main
from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from leasegate.proxy.tenant_budgets import REFRESH_S
from leasegate.spend import seconds_left
from tests.fixtures.deployments import Deployment, deployment
from tests.fixtures.gateway_client import GatewayClient
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.services import StoresEnv

PER_REQUEST = 16
PRICES = {"input": "2.50", "output": "10.00", "cache_read": "1.25"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CROSSING_BOUND_S = 1.0


@dataclass
class Failing:
    fail: bool = False

    def __call__(self, _: MockRequest) -> Reply | None:
        return Reply(status=503) if self.fail else None


async def set_budget(
    gateway: GatewayClient, tenant: str, body: dict[str, Any], *, as_admin: bool = True
) -> httpx.Response:
    headers = ADMIN if as_admin else gateway.control_headers
    return await gateway.client.post(
        f"{gateway.control_url}/control/v2/tenants/{tenant}/budget",
        json={"reason": "test", **body},
        headers=headers,
    )


async def audit_revision(gateway: GatewayClient) -> int:
    return int((await gateway.control_get("/accounts"))["revision"])


def refused(response: httpx.Response, code: str, status: int = 402) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


async def all_refuse(
    gateway: GatewayClient, proxies: list[str], keys: list[dict[str, Any]], code: str
) -> float:
    """Seconds from now to the start of the first round of requests that every proxy refused
    for every key with `code` (polled; bounded). A round's own latency is not counted: the
    refusals were in place when it started."""
    started = time.monotonic()
    while time.monotonic() - started < 5 * CROSSING_BOUND_S:
        round_at = time.monotonic()
        answers = [await gateway.at(proxy_url=p).chat(k) for k in keys for p in proxies]
        if all(a.status_code == 402 and a.json()["error"]["code"] == code for a in answers):
            return round_at - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"the proxies did not all refuse with {code}")


def accounts(primary: MockUpstream, backup: MockUpstream) -> list[dict[str, Any]]:
    priced = {"served": "gpt-4o-a", "prices": PRICES}
    return [
        account_entry("primary", primary, {"gpt-4o": priced}),  # type: ignore[dict-item]
        account_entry("backup", backup, {"gpt-4o": {"served": "gpt-4o-b", "prices": PRICES}}),  # type: ignore[dict-item]
    ]


def env_of(tmp_path: Path, entries: list[dict[str, Any]], stores: StoresEnv) -> dict[str, str]:
    return gateway_env(
        tmp_path,
        entries,
        **stores,
        currency="USD",
    )


@asynccontextmanager
async def two_proxies(tmp_path: Path) -> AsyncIterator[tuple[Deployment, Failing]]:
    """Two proxies (`replicas`) in front of a primary the test fails at will and a backup."""
    failing = Failing()
    async with (
        MockUpstream(failing, chunks=4) as primary,
        MockUpstream(chunks=4) as backup,
        deployment("replicas", tmp_path, accounts(primary, backup), {}, currency="USD") as site,
    ):
        yield site, failing


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.postgres
@pytest.mark.redis
async def test_two_proxies_enforce_a_tenant_budget_and_a_dispatch_budget(tmp_path: Path) -> None:
    async with two_proxies(tmp_path) as (site, primary):
        await _tenant_budget_crossed(site, f"acme/{secrets.token_hex(3)}")
        await _dispatch_budget_crossed_mid_chain(site, primary, f"beta/{secrets.token_hex(3)}")


async def _tenant_budget_crossed(site: Deployment, tenant: str) -> None:
    revision = await audit_revision(site)
    budget = {"period": "day", "max_tokens": 3 * PER_REQUEST + 1}
    forbidden = await set_budget(
        site, tenant, {"expected_revision": revision, **budget}, as_admin=False
    )
    refused(forbidden, "forbidden", 403)
    stale = await set_budget(site, tenant, {"expected_revision": revision + 7, **budget})
    refused(stale, "revision-conflict", 409)
    answer = await set_budget(site, tenant, {"expected_revision": revision, **budget})
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["budget"] == {"period": "day", "max_tokens": 49, "max_cost": None}
    assert view["revision"] == revision + 1
    assert view["record"]["kind"] == "tenant-budget"
    assert view["record"]["actor"] == "ops-alice"
    audit = await site.control_get("/audit")
    assert audit["chain"] == "ok"
    assert audit["records"][-1]["tenant"] == tenant

    first = await site.minted(tenant=tenant, dispatch_id="d-1")
    second = await site.minted(tenant=tenant, dispatch_id="d-2")
    # 16, 32, 48 spent: the fourth starts below 49 and takes the tenant to 64
    for key, via in ((first, 0), (second, 1), (first, 1), (second, 0)):
        assert (await site.via(via).chat(key)).status_code == 200
    took = await all_refuse(site, site.proxies, [first, second], "tenant-budget-exhausted")
    assert took < CROSSING_BOUND_S

    error = refused(await site.via(1).chat(first), "tenant-budget-exhausted")
    assert error["disposition"] == "held"
    mint = refused(await site.mint(tenant=tenant, dispatch_id="d-3"), "tenant-budget-exhausted")
    assert mint["disposition"] == "held"
    left = seconds_left(datetime.now(UTC), "day")
    assert left - 0.01 <= mint["retry_after_s"] <= left + 30  # asked before `left` was
    other = await site.minted(
        tenant=f"{tenant}-other", dispatch_id="d-1"
    )  # another tenant is not affected
    assert (await site.via(1).chat(other)).status_code == 200

    status = await site.control_get(f"/tenants/{tenant}/budget")
    assert (status["spent"]["tokens"], status["spent"]["exhausted"]) == (4 * PER_REQUEST, True)
    listed = await site.control_get("/tenants")
    assert [t["tenant"] for t in listed["tenants"]] == [tenant]

    cleared = await set_budget(site, tenant, {"expected_revision": revision + 1, "clear": True})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["budget"] is None
    assert (await site.mint(tenant=tenant, dispatch_id="d-3")).status_code == 201
    started = time.monotonic()
    while (await site.via(0).chat(first)).status_code != 200 or (
        await site.via(1).chat(first)
    ).status_code != 200:
        assert time.monotonic() - started < 5 * CROSSING_BOUND_S
        await asyncio.sleep(0.05)


async def _dispatch_budget_crossed_mid_chain(
    site: Deployment, primary: Failing, tenant: str
) -> None:
    minted = await site.minted(
        tenant=tenant, dispatch_id="d-1", budget={"max_tokens": 3 * PER_REQUEST + 1}
    )
    assert (await site.via(0).chat(minted)).status_code == 200  # 16
    primary.fail = True
    assert (await site.via(1).chat(minted)).status_code == 503  # no usage: nothing spent
    for _ in range(200):  # the failure's evidence row licenses the hop
        rows = (await site.control_get(f"/evidence?decision_id={minted['mint_decision_id']}"))[
            "evidence"
        ]
        if len(rows) >= 2:
            break
        await asyncio.sleep(0.025)
    deleted = await site.revoke(minted["key_id"])
    assert deleted.status_code == 204
    hop = await site.minted(
        tenant=tenant, dispatch_id="d-1", retry_of_mint_decision_id=minted["mint_decision_id"]
    )
    assert (hop["account_id"], hop["chain_id"]) == ("backup", minted["chain_id"])
    for via in (1, 0, 1):  # 32, 48, 64: the hop spends the chain's remainder on both proxies
        assert (await site.via(via).chat(hop)).status_code == 200
    took = await all_refuse(site, site.proxies, [hop], "dispatch-budget-exhausted")
    assert took < CROSSING_BOUND_S
    primary.fail = False


class SteppedClock:
    """Wall time the test sets; monotonic time is the machine's (caches still age)."""

    def __init__(self, now: datetime) -> None:
        self.at = now

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return time.monotonic()


async def test_a_tenant_refused_at_the_end_of_a_month_recovers_when_the_month_ends(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    clock = SteppedClock(datetime(2026, 12, 31, 23, 59, 0, tzinfo=UTC))
    async with MockUpstream(chunks=4) as primary, MockUpstream(chunks=4) as backup:
        env = env_of(tmp_path, accounts(primary, backup), stores_env)
        async with in_process_gateway(env, clock=clock) as gw:
            site = gw
            tenant = "acme/monthly"
            # one request costs 8 x 2.50 + 4 x 1.25 + 4 x 10.00 = 65 millionths
            budget = {"expected_revision": 0, "period": "month", "max_cost": "0.000065"}
            set_ = await set_budget(site, tenant, budget)
            assert set_.status_code == 200, set_.text
            key = await site.minted(tenant=tenant, dispatch_id="d-1", ttl_s=3600)
            assert (await site.chat(key)).status_code == 200
            error = refused(await site.chat(key), "tenant-budget-exhausted")
            assert error["retry_after_s"] == 60.0
            mint = refused(
                await site.mint(tenant=tenant, dispatch_id="d-2"), "tenant-budget-exhausted"
            )
            assert mint["retry_after_s"] == 60.0
            status = await site.control_get(f"/tenants/{tenant}/budget")
            assert status["spent"]["cost"] == "0.000065"
            assert status["spent"]["period_end"] == "2027-01-01T00:00:00.000Z"
            metrics = await site.metrics()
            gauge = 'leasegate_tenant_budget_spent_fraction{period="month",tenant="acme/monthly"}'
            assert f"{gauge} 1.0" in metrics.splitlines()
            cost = 'leasegate_proxy_cost_total{account="primary",model="gpt-4o-a"}'
            assert f"{cost} 6.5e-05" in metrics.splitlines()

            clock.at += timedelta(seconds=60)  # January: a new period, a new running total
            assert (await site.mint(tenant=tenant, dispatch_id="d-2")).status_code == 201
            assert (await site.chat(key)).status_code == 200
            status = await site.control_get(f"/tenants/{tenant}/budget")
            assert (status["spent"]["cost"], status["spent"]["exhausted"]) == ("0.000065", True)


async def test_a_budget_set_mid_period_counts_the_tenants_spend_so_far(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    async with MockUpstream(chunks=4) as primary, MockUpstream(chunks=4) as backup:
        env = env_of(tmp_path, accounts(primary, backup), stores_env)
        async with in_process_gateway(env) as gw:
            site = gw
            key = await site.minted(tenant="acme/web", dispatch_id="d-1")
            other = await site.minted(tenant="acme/api", dispatch_id="d-1")
            for spender in (key, key, other):
                assert (await site.chat(spender)).status_code == 200
            for minted, count in ((key, 2), (other, 1)):
                path = f"/evidence?decision_id={minted['mint_decision_id']}"
                for _ in range(200):
                    if len((await site.control_get(path))["evidence"]) == count:
                        break
                    await asyncio.sleep(0.025)

            budget = {"expected_revision": 0, "period": "day", "max_tokens": 3 * PER_REQUEST}
            answer = await set_budget(site, "acme/web", budget)
            assert answer.status_code == 200, answer.text
            spent = answer.json()["spent"]
            assert (spent["tokens"], spent["exhausted"]) == (2 * PER_REQUEST, False)
            assert spent["cost"] == "0.00013"  # two requests' evidence, not acme/api's
            await asyncio.sleep(REFRESH_S)  # the proxy learns budgets within this age
            assert (await site.chat(key)).status_code == 200  # 48: reached
            await all_refuse(site, [site.url], [key], "tenant-budget-exhausted")
            assert (await site.chat(other)).status_code == 200


async def test_the_cli_sets_lists_and_clears_a_tenants_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with MockUpstream(chunks=4) as primary, MockUpstream(chunks=4) as backup:
        env = env_of(tmp_path, accounts(primary, backup), {})
        async with in_process_gateway(env, [primary, backup]) as gw:
            base = ["--url", gw.url, "--token", ADMIN_TOKEN]

            def cli(*argv: str) -> int:
                return main(["tenants", *argv, *base])

            set_ = ("budget", "acme/web", "--period", "day", "--max-cost", "2.50")
            assert await asyncio.to_thread(cli, *set_, "--reason", "pilot") == 0
            assert capsys.readouterr().out == "acme/web: 2.5 USD per day at revision 1\n"
            assert await asyncio.to_thread(cli, "list") == 0
            listed = capsys.readouterr().out.splitlines()
            assert listed[0] == "revision 1  chain ok  USD"
            assert listed[2].split() == ["acme/web", "day", "-", "2.5", "0", "tokens,", "0"]
            no_bound = await asyncio.to_thread(cli, "budget", "acme/web", "--reason", "x")
            assert no_bound == 1
            assert "invalid-request" in capsys.readouterr().err
            clear = ("budget", "acme/web", "--clear", "--reason", "pilot over")
            assert await asyncio.to_thread(cli, *clear) == 0
            assert capsys.readouterr().out == "acme/web: no budget at revision 2\n"
            audit = await gw.control_get("/audit")
            assert [r["state"] for r in audit["records"]] == ["set", "cleared"]
