"""The alerting rules in deploy/prometheus/ as Prometheus runs them: `promtool check rules`
accepts the file, and `promtool test rules` evaluates every alert against series scraped from
a real gateway (production mode: Postgres and a Redis of the test's own) driven into each
condition: an account's circuit open, every account of a served model cooling, a tenant past
80 % of its budget and one at 100 %, then Redis killed (store errors, the revocation
subscription lost). The healthy gateway's own series fire nothing. promtool comes from
Debian's `prometheus` package (`scripts/ensure-promtool`); without it these tests skip, and
fail under CI."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from leasegate.proxy.tenant_budgets import REFRESH_S
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.own_redis import own_redis
from tests.fixtures.scripted import ENV
from tests.fixtures.services import production_stores

RULES = Path(__file__).parents[2] / "deploy" / "prometheus" / "leasegate-alerts.yaml"
PER_REQUEST = 12 + 20  # input and output tokens the demo upstream reports for one chat
Scrape = dict[str, float]
"""A scrape: each series (`name{labels}`, as promtool reads it) and its value."""


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool is missing (Debian's prometheus package; scripts/ensure-promtool)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must check the alert rules", pytrace=False)
        pytest.skip(message)
    return path


def test_the_alert_rules_pass_promtool_check() -> None:
    checked = subprocess.run(  # noqa: S603 - our own file, a fixed command
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 9 rules found" in checked.stdout


def rule_metrics() -> set[str]:
    text = RULES.read_text()
    exprs = [r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    return {name for expr in exprs for name in re.findall(r"\bleasegate_[a-z_]+", expr)}


def _series(name: str, labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


async def scrape(gw: Gateway) -> Scrape:
    """The series the rules read, as the gateway exports them now."""
    wanted = rule_metrics()
    text = (await gw.client.get(f"{gw.url}/metrics")).text
    return {
        _series(sample.name, sample.labels): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in wanted
    }


def _case(before: Scrape, after: Scrape, firing: list[dict[str, str]], name: str) -> dict[str, Any]:
    """One promtool test: `before` at 0m, then `after` held for 10 minutes (a series missing
    from `before` is absent there, one missing from `after` is marked stale, as Prometheus
    does with a series a target stops exporting); at 5m exactly `firing` are firing."""
    series = []
    for key in sorted(before.keys() | after.keys()):
        first = before.get(key)
        then = after.get(key)
        head = "_" if first is None else repr(first)
        tail = "stale" if then is None else f"{then!r}x10"  # dropped: stale at once
        series.append({"series": key, "values": f"{head} {tail}"})
    inner = "alertname, account, model, tenant, store"
    return {
        "name": name,
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f'group by ({inner}) (ALERTS{{alertstate="firing"}})',
                "eval_time": "5m",
                "exp_samples": [{"labels": _series("", labels), "value": 1} for labels in firing],
            }
        ],
    }


def promtool_test(tmp_path: Path, cases: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yaml").write_text(RULES.read_text())
    spec = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": cases}
    (tmp_path / "alerts-test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return subprocess.run(  # noqa: S603 - fixed command on files of the test's own
        [promtool(), "test", "rules", "alerts-test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def _script(request: MockRequest) -> Reply | None:
    served = request.json.get("model") if isinstance(request.json, dict) else None
    if served == "m-circuit-s":
        return Reply(status=401)  # a credential fault: the account's circuit opens
    if served == "m-cool-s":
        return Reply(status=503)  # a model-scope fault: the account cools for the model
    return None


async def set_budget(gw: Gateway, tenant: str, max_tokens: int) -> None:
    revision = int((await gw.control_get("/accounts"))["revision"])
    answer = await gw.client.post(
        f"{gw.url}/control/v2/tenants/{tenant}/budget",
        json={
            "reason": "alert test",
            "expected_revision": revision,
            "period": "day",
            "max_tokens": max_tokens,
        },
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 200, answer.text


async def spend_once(gw: Gateway, tenant: str) -> None:
    minted = await gw.minted(tenant=tenant, model="m-budget", dispatch_id=f"d-{tenant}")
    assert (await gw.chat(minted["key"], model="m-budget")).status_code == 200
    await gw.evidence_for(minted["mint_decision_id"])


async def fail_on(gw: Gateway, model: str, dispatch_id: str, status: int) -> None:
    minted = await gw.minted(model=model, dispatch_id=dispatch_id)
    assert (await gw.chat(minted["key"], model=model)).status_code == status


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.postgres
async def test_each_alert_fires_on_a_gateway_driven_into_its_condition(tmp_path: Path) -> None:
    with own_redis(tmp_path / "redis") as redis:
        async with production_stores() as stores, MockUpstream(_script) as upstream:
            accounts = [
                account_entry("acct-circuit", upstream, {"m-circuit": "m-circuit-s"}),
                account_entry("cool-a", upstream, {"m-cool": "m-cool-s"}),
                account_entry("cool-b", upstream, {"m-cool": "m-cool-s"}),
                account_entry("budgeted", upstream, {"m-budget": "m-budget-s"}),
            ]
            env = gateway_env(
                tmp_path,
                accounts,
                database_url=stores["database_url"],
                redis_url=redis.url,
                redis_prefix=stores["redis_prefix"],
                extra=ENV,
            )
            async with in_process_gateway(env, [upstream]) as gw:
                healthy = await scrape(gw)
                await fail_on(gw, "m-circuit", "d-circuit", 401)
                await fail_on(gw, "m-cool", "d-cool-1", 503)
                await fail_on(gw, "m-cool", "d-cool-2", 503)  # the other account: all cool
                await set_budget(gw, "t-near", PER_REQUEST * 5 // 4)  # 32/40: 80 %
                await set_budget(gw, "t-out", PER_REQUEST)  # 32/32: exhausted
                await asyncio.sleep(REFRESH_S)  # the proxy learns the budgeted tenants
                await spend_once(gw, "t-near")
                await spend_once(gw, "t-out")
                driven = await scrape(gw)
                redis.stop()
                for _ in range(100):  # the subscription notices within a ping and a reply
                    lost = await scrape(gw)
                    if lost.get("leasegate_revocation_subscription_up{}") == 0.0:
                        break
                    await asyncio.sleep(0.1)
    assert healthy["leasegate_revocation_subscription_up{}"] == 1.0
    result = promtool_test(
        tmp_path,
        [
            _case(healthy, healthy, [], "a healthy gateway fires nothing"),
            _case(
                healthy,
                driven,
                [
                    {"alertname": "LeasegateAccountCircuitOpen", "account": "acct-circuit"},
                    {"alertname": "LeasegateModelUnavailable", "model": "m-cool-s"},
                    {"alertname": "LeasegateTenantBudgetExhausted", "tenant": "t-out"},
                    {"alertname": "LeasegateTenantBudgetNearlySpent", "tenant": "t-near"},
                ],
                "circuit, cooling and budgets",
            ),
            _case(
                driven,
                lost,
                [
                    {"alertname": "LeasegateRevocationSubscriptionDown"},
                    {"alertname": "LeasegateStoreErrors", "store": "redis"},
                ],
                "redis lost",
            ),
        ],
    )
    assert result.returncode == 0, result.stdout + result.stderr
