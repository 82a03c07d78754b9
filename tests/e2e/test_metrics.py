"""Metrics as a scraper sees them after real traffic, and the Grafana dashboard checked against
the names a running gateway actually exports (embedded and production mode)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.services import StoresEnv

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "leasegate.json"
ALERTS = Path(__file__).parents[2] / "deploy" / "prometheus" / "leasegate-alerts.yaml"
PRICES = {"input": "2.50", "output": "10.00"}


@dataclass
class Failing:
    """The primary's upstream: 503 for every request while `on`."""

    on: bool = False

    def __call__(self, _: MockRequest) -> Reply | None:
        return Reply(status=503) if self.on else None


@dataclass
class Traffic:
    gateway: Gateway
    samples: dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture
async def traffic(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Traffic]:
    """A gateway after successes (on a priced model, for a tenant with a budget), upstream
    failures (a cooldown), a hop, refusals of both services; and its /metrics, parsed."""
    failing = Failing()
    async with MockUpstream(failing, chunks=4) as primary, MockUpstream(chunks=4) as backup:
        accounts = [
            account_entry(
                "primary",
                primary,
                {"gpt-4o": {"served": "gpt-4o-a", "prices": PRICES}},  # type: ignore[dict-item]
                request_capacity=4,
            ),
            account_entry("backup", backup, {"gpt-4o": "gpt-4o-b"}, lease_capacity=3),
        ]
        env = gateway_env(
            tmp_path,
            accounts,
            **stores_env,
            currency="USD",
        )
        async with in_process_gateway(env, [primary, backup]) as gw:
            await _budget(gw)
            await _drive(gw, failing)
            text = (await gw.client.get(f"{gw.url}/metrics")).text
            samples: dict[str, list[tuple[dict[str, str], float]]] = {}
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    samples.setdefault(s.name, []).append((s.labels, s.value))
            yield Traffic(gw, samples)


async def _budget(gw: Gateway) -> None:
    revision = int((await gw.control_get("/accounts"))["revision"])
    answer = await gw.client.post(
        f"{gw.url}/control/v2/tenants/{gw.tenant}/budget",
        json={
            "reason": "metrics",
            "expected_revision": revision,
            "period": "month",
            "max_tokens": 1_000_000,
        },
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 200, answer.text


async def _drive(gw: Gateway, failing: Failing) -> None:
    ok = await gw.minted(dispatch_id="ok")
    assert (await gw.chat(ok["key"])).status_code == 200
    assert (await gw.chat(ok["key"], stream=True)).status_code == 200
    failing.on = True
    first = None
    for n in range(3):  # three model-scope failures: primary cools for gpt-4o-a
        minted = await gw.minted(dispatch_id=f"fail-{n}")
        assert minted["account_id"] == "primary"
        assert (await gw.chat(minted["key"])).status_code == 503
        first = first or minted
    assert first is not None
    await gw.evidence_for(first["mint_decision_id"])
    revoked = await gw.revoke(first["key_id"])
    assert revoked.status_code == 204
    hop = await gw.minted(dispatch_id="fail-0", retry_of_mint_decision_id=first["mint_decision_id"])
    assert hop["hop"] == 1
    assert (await gw.chat(first["key"])).json()["error"]["code"] == "key-revoked"
    assert (await gw.mint(dispatch_id="x", model="nobody-serves-this")).status_code == 404


def _value(traffic: Traffic, name: str, **labels: str) -> float:
    return sum(
        value
        for sample_labels, value in traffic.samples.get(name, [])
        if all(sample_labels.get(k) == v for k, v in labels.items())
    )


async def test_traffic_shows_in_the_metrics(traffic: Traffic) -> None:
    a = {"account": "primary", "model": "gpt-4o-a"}
    assert _value(traffic, "leasegate_proxy_request_seconds_count", **a) == 6  # 5 + a refusal
    assert _value(traffic, "leasegate_proxy_ttfb_seconds_count", **a) == 5
    assert _value(traffic, "leasegate_proxy_tokens_total", kind="input", **a) > 0
    assert _value(traffic, "leasegate_proxy_tokens_total", kind="output", **a) > 0
    assert _value(traffic, "leasegate_proxy_refusals_total", code="key-revoked") == 1
    assert _value(traffic, "leasegate_model_cooling", **a) == 1
    assert _value(traffic, "leasegate_health_transitions_total", account="primary") >= 1
    decisions = "leasegate_mint_decisions_total"
    assert _value(traffic, decisions, kind="fresh", outcome="selected", code="none") == 4
    assert _value(traffic, decisions, outcome="refused", code="model-not-served") == 1
    assert _value(traffic, "leasegate_fallback_hops_total", kind="retry", outcome="selected") == 1
    assert _value(traffic, "leasegate_store_call_seconds_count") > 0
    # production mode times its Redis calls too (request slots, health records)
    production = bool(traffic.gateway.env.get("LEASEGATE_REDIS_URL"))
    assert (_value(traffic, "leasegate_store_call_seconds_count", store="redis") > 0) is production
    assert "tenant" not in {k for labels, _ in traffic.samples[decisions] for k in labels}


async def test_the_dashboard_uses_only_exported_metrics(traffic: Traffic) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs.append(dashboard["templating"]["list"][1]["definition"])
    used = {name for expr in exprs for name in re.findall(r"\bleasegate_[a-z_]+", expr)}
    assert len(used) >= 24
    missing = sorted(used - traffic.samples.keys())
    assert not missing, f"the dashboard queries metrics the gateway does not export: {missing}"
    panels_with_data = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert all(p.get("targets") for p in panels_with_data)


async def test_the_alert_rules_use_only_exported_metrics(traffic: Traffic) -> None:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    used = {name for r in rules for name in re.findall(r"\bleasegate_[a-z_]+", r["expr"])}
    assert len(used) >= 9
    missing = sorted(used - traffic.samples.keys())
    assert not missing, f"the alert rules read metrics the gateway does not export: {missing}"
    assert _value(traffic, "leasegate_proxy_cost_total", account="primary") > 0
    assert _value(traffic, "leasegate_tenant_budget_spent_fraction", period="month") > 0
    assert _value(traffic, "leasegate_revocation_subscription_up") == 1
