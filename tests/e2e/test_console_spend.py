"""The console's Spend page over HTTP: today's and this month's usage per tenant, account and
served model, the tenant budgets with what they have spent, and spend per day as inline SVG
(no script, nothing from another origin)."""

from __future__ import annotations

import re
from html import unescape

from tests.fixtures.console import signed_in
from tests.fixtures.gateways import ADMIN_TOKEN, CONTROL_TOKEN, Gateway
from tests.fixtures.servers import local_client

PER_REQUEST = 12 + 20  # input and output tokens the demo upstream reports for one chat


async def _spend(gateway: Gateway, tenant: str, model: str = "gpt-4o") -> None:
    minted = await gateway.minted(tenant=tenant, model=model, dispatch_id=f"d-{tenant}-{model}")
    assert (await gateway.chat(minted["key"], model=model)).status_code == 200
    await gateway.evidence_for(minted["mint_decision_id"])


def _rows(html: str, caption: str) -> list[list[str]]:
    """The body rows of the table with `caption`, each as its cells' text."""
    table = re.search(rf"<caption>{re.escape(caption)}</caption>(.*?)</table>", html, re.S)
    assert table is not None, f"no table {caption!r}"
    body = table.group(1).split("<tbody>", 1)[1]
    return [
        [
            unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


async def test_spend_shows_usage_per_tenant_account_and_model_and_the_budgets(
    gateway: Gateway,
) -> None:
    revision = int((await gateway.control_get("/accounts"))["revision"])
    answer = await gateway.client.post(
        f"{gateway.url}/control/v2/tenants/acme/web/budget",
        json={
            "reason": "q4",
            "expected_revision": revision,
            "period": "month",
            "max_tokens": PER_REQUEST * 4,
        },
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 200, answer.text
    await _spend(gateway, "acme/web")
    await _spend(gateway, "acme/web", "gpt-4o-mini")
    await _spend(gateway, "beta/ci")
    async with local_client(base_url=gateway.url) as anonymous:
        assert (await anonymous.get("/console/spend")).status_code == 303
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        html = (await client.get("/console/spend")).text
    budgets = _rows(html, f"Tenant budgets (audit revision {revision + 1})")
    assert len(budgets) == 1
    tenant, period, max_tokens, _, spent, _, fraction, ends = budgets[0]
    assert (tenant, period, max_tokens, spent) == ("acme/web", "month", "128", "64")
    assert fraction == "50 %"
    assert ends.endswith("T00:00:00+00:00")
    day = re.search(r"Today \((\d{4}-\d{2}-\d{2})\) by tenant", html)
    assert day is not None
    by_tenant = _rows(html, f"Today ({day.group(1)}) by tenant")
    assert sorted((r[0], r[1]) for r in by_tenant) == [("acme/web", "2"), ("beta/ci", "1")]
    by_model = _rows(html, f"Today ({day.group(1)}) by model")
    assert sorted((r[0], r[1]) for r in by_model) == [
        ("gpt-4o", "2"),
        ("gpt-4o-mini", "1"),
    ]
    month = day.group(1)[:7]
    assert _rows(html, f"This month ({month}) by account")[0][:2] == ["openai-main", "3"]
    # one bar for today, its exact value in its title
    svg = re.search(r"<svg[^>]*>(.*?)</svg>", html, re.S)
    assert svg is not None
    assert len(re.findall(r"<rect ", svg.group(1))) == 1
    assert f"{day.group(1)}: {PER_REQUEST * 3} tokens" in svg.group(1)


async def test_the_audit_page_shows_what_each_tenant_budget_record_set(gateway: Gateway) -> None:
    for body in (
        {"period": "day", "max_tokens": 500, "max_cost": "2.50"},
        {"clear": True},
    ):
        revision = int((await gateway.control_get("/accounts"))["revision"])
        answer = await gateway.client.post(
            f"{gateway.url}/control/v2/tenants/acme/web/budget",
            json={"reason": "audit page", "expected_revision": revision, **body},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert answer.status_code == 200, answer.text
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        html = (await client.get("/console/audit")).text
    records = _rows(html, "Records, newest first")
    assert [r[4:6] for r in records[:2]] == [
        ["tenant acme/web", "budget cleared"],
        ["tenant acme/web", "budget per day: max 500 tokens max cost 2.50"],
    ]


async def test_evidence_links_each_row_to_its_chain_and_takes_a_time_range(
    gateway: Gateway,
) -> None:
    minted = await gateway.minted(tenant="acme/web", dispatch_id="d-linked")
    assert (await gateway.chat(minted["key"])).status_code == 200
    await gateway.evidence_for(minted["mint_decision_id"])
    decision = minted["mint_decision_id"]
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        recent = (await client.get("/console/evidence?within=15m")).text
        link = f'href="/console/dispatches?decision={decision}"'
        assert link in recent
        chain = (await client.get(f"/console/dispatches?decision={decision}")).text
        assert 'value="acme/web"' in chain
        assert 'value="d-linked"' in chain
        assert f"<code>{decision}</code>" in chain
        unknown = await client.get("/console/evidence?within=forever")
        assert unknown.status_code == 400
