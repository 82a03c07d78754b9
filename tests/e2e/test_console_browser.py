"""The console in a real browser: Debian's headless Chromium driven by Playwright, against one
embedded gateway (SQLite, in-process stores) on scripted upstreams for the whole module.

Screenshots go to `test-artifacts/console/` (or `$LEASEGATE_TEST_ARTIFACTS/console/`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.faults import eventually
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    CONTROL_TOKEN,
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.asyncio(loop_scope="module")]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("LEASEGATE_TEST_ARTIFACTS", "test-artifacts")) / "console"
WAIT_MS = 10_000


def require_chromium() -> str:
    if CHROMIUM.exists():
        return str(CHROMIUM)
    message = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must run the browser tests", pytrace=False)
    pytest.skip(message)


@dataclass
class Scripted:
    """The primary account's upstream answers `replies[served model]` (absent: healthy)."""

    replies: dict[str, Reply]

    def __call__(self, request: MockRequest) -> Reply | None:
        model = request.json.get("model") if request.json else None
        return self.replies.get(str(model))


@dataclass
class Console:
    gateway: Gateway
    script: Scripted
    browser: Browser

    async def signed_in(self, token: str) -> tuple[BrowserContext, Page]:
        context = await self.browser.new_context(
            base_url=self.gateway.url, viewport={"width": 1280, "height": 800}
        )
        page = await context.new_page()
        await page.goto("/console/pool")
        await expect(page).to_have_url(f"{self.gateway.url}/console/sign-in")
        await page.get_by_label("Token").fill(token)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page).to_have_url(f"{self.gateway.url}/console/pool")
        return context, page

    async def revision(self) -> int:
        revision: int = (await self.gateway.control_get("/accounts"))["revision"]
        return revision


async def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def console(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Console]:
    chromium = require_chromium()
    script = Scripted({})
    async with MockUpstream(script, chunks=4) as primary, MockUpstream(chunks=4) as backup:
        accounts = [
            account_entry(
                "primary",
                primary,
                {"gpt-4o": "gpt-4o-a", "gpt-4o-mini": "gpt-4o-mini-a"},
                lease_capacity=5,
                request_capacity=4,
            ),
            account_entry("backup", backup, {"gpt-4o": "gpt-4o-b"}, lease_capacity=5),
            account_entry("spare", backup, {"spare-model": "spare-model"}),
        ]
        env = gateway_env(tmp_path_factory.mktemp("console"), accounts)
        async with in_process_gateway(env, [primary, backup]) as gw, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=FLAGS)
            try:
                yield Console(gw, script, browser)
            finally:
                await browser.close()


async def test_sign_in_keeps_the_session_out_of_reach_of_scripts(console: Console) -> None:
    context = await console.browser.new_context(base_url=console.gateway.url)
    page = await context.new_page()
    await page.goto("/console/sign-in")
    await page.get_by_label("Token").fill("not-a-token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("not an operator or control token")
    await page.get_by_label("Token").fill(ADMIN_TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(f"{console.gateway.url}/console/pool")
    await expect(page.locator('tr[data-account="primary"]')).to_contain_text("healthy")
    (cookie,) = await context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
    assert ADMIN_TOKEN not in cookie["value"]
    assert await page.evaluate("document.cookie") == ""  # HttpOnly: invisible to JavaScript
    assert ADMIN_TOKEN not in await page.content()
    assert ADMIN_TOKEN not in page.url
    await shot(page, "pool")
    await page.set_viewport_size({"width": 390, "height": 844})
    await shot(page, "pool-phone")
    await context.close()


async def test_a_cooling_model_appears_without_a_reload(console: Console) -> None:
    context, page = await console.signed_in(ADMIN_TOKEN)
    cell = page.locator('tr[data-account="primary"] td[data-model="gpt-4o-mini-a"]')
    await expect(cell).to_contain_text("healthy")
    await page.evaluate("window.__sameDocument = true")

    console.script.replies["gpt-4o-mini-a"] = Reply(status=503)
    gw = console.gateway
    for n in range(3):  # LEASEGATE_FAILURE_THRESHOLD
        minted = await gw.minted(dispatch_id=f"cool-{n}", model="gpt-4o-mini")
        assert (await gw.chat(minted["key"], model="gpt-4o-mini")).status_code == 503

    await expect(cell).to_contain_text("cooling", timeout=WAIT_MS)
    await expect(cell).to_contain_text("until")
    await expect(cell).to_contain_text("trips 1")
    assert await page.evaluate("window.__sameDocument") is True  # refreshed in place
    other = page.locator('tr[data-account="primary"] td[data-model="gpt-4o-a"]')
    await expect(other).to_contain_text("healthy")  # one model's failures bench only that model
    await shot(page, "pool-cooling")
    await context.close()


async def test_disabling_an_account_makes_the_proxy_refuse_its_keys(console: Console) -> None:
    gw = console.gateway
    minted = await gw.minted(dispatch_id="spare-1", model="spare-model")
    assert (await gw.chat(minted["key"], model="spare-model")).status_code == 200

    context, page = await console.signed_in(ADMIN_TOKEN)
    await page.goto("/console/actions")
    card = page.get_by_role("region", name="spare")
    await card.get_by_label("Disable").check()
    await card.get_by_label("Reason").fill("provider incident 4711")
    await card.get_by_role("button", name="Apply to spare").click()

    await expect(page.get_by_role("status")).to_contain_text("spare is now disabled")
    await expect(page.get_by_role("status")).to_contain_text("1 live keys revoked")
    refused = await gw.chat(minted["key"], model="spare-model")
    assert refused.status_code in (401, 403), refused.text
    assert refused.json()["error"]["code"] in {"key-revoked", "account-disabled"}
    await shot(page, "actions-disabled")

    await page.goto("/console/pool")
    row = page.locator('tr[data-account="spare"]')
    await expect(row).to_contain_text("disabled")
    await expect(row).to_contain_text("by ops-alice")
    await expect(row).to_contain_text("provider incident 4711")

    await page.goto("/console/audit")
    await expect(page.locator("#chain-state")).to_contain_text("ok")
    await expect(page.get_by_role("cell", name="provider incident 4711")).to_be_visible()
    await shot(page, "audit")
    await _enable(page, "spare")
    await context.close()


async def _enable(page: Page, account: str) -> None:
    await page.goto("/console/actions")
    card = page.get_by_role("region", name=account)
    await card.get_by_label("Enable").check()
    await card.get_by_label("Reason").fill("back to normal")
    await card.get_by_role("button", name=f"Apply to {account}").click()
    await expect(page.get_by_role("status")).to_contain_text(f"{account} is now enabled")


async def test_a_dispatch_chain_shows_the_hop(console: Console) -> None:
    gw = console.gateway
    console.script.replies["gpt-4o-a"] = Reply(status=429)
    first = await gw.minted(dispatch_id="hop-1")
    assert first["account_id"] == "primary"
    assert (await gw.chat(first["key"])).status_code == 429
    await gw.evidence_for(first["mint_decision_id"])
    revoked = await gw.revoke(first["key_id"])
    assert revoked.status_code == 204
    hop = await gw.minted(dispatch_id="hop-1", retry_of_mint_decision_id=first["mint_decision_id"])
    assert (hop["account_id"], hop["hop"]) == ("backup", 1)
    console.script.replies.pop("gpt-4o-a")

    context, page = await console.signed_in(CONTROL_TOKEN)
    await page.get_by_role("link", name="Dispatches").click()
    find = page.get_by_role("search", name="Find a dispatch")
    await find.get_by_label("Tenant").fill("acme/web")
    await find.get_by_label("Dispatch id").fill("hop-1")
    await find.get_by_role("button", name="Find").click()

    decisions = page.locator("li.decision")
    await expect(decisions).to_have_count(2)
    await expect(decisions.nth(0)).to_contain_text("primary")
    await expect(decisions.nth(0)).to_contain_text("revoked")
    await expect(decisions.nth(0)).to_contain_text("upstream-error")
    await expect(decisions.nth(1)).to_contain_text("retry, selected")
    await expect(decisions.nth(1)).to_contain_text("backup")
    await expect(decisions.nth(1)).to_contain_text("1 · 1")  # position 1, hop 1
    await expect(decisions.nth(1)).to_contain_text(first["mint_decision_id"])
    await shot(page, "dispatch-hop")
    await context.close()


async def test_a_stale_revision_is_refused_and_shows_what_changed(console: Console) -> None:
    context, page = await console.signed_in(ADMIN_TOKEN)
    await page.goto("/console/actions")
    seen = int(await page.locator("#page-revision").inner_text())

    # Another operator drains the account after this page was rendered.
    other = await console.gateway.client.post(
        f"{console.gateway.url}/control/v2/accounts/backup/state",
        json={"state": "draining", "expected_revision": seen, "reason": "bob's maintenance"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert other.status_code == 200, other.text

    card = page.get_by_role("region", name="backup")
    await card.get_by_label("Disable").check()
    await card.get_by_label("Reason").fill("alice acting on an old view")
    async with page.expect_response(_post_to("/console/actions")) as answer:
        await card.get_by_role("button", name="Apply to backup").click()
    assert (await answer.value).status == 409
    await expect(page.get_by_role("alert")).to_contain_text(f"revision {seen}")
    await expect(page.get_by_role("cell", name="bob's maintenance")).to_be_visible()
    await shot(page, "conflict")
    assert await console.revision() == seen + 1  # nothing of alice's was applied

    await page.get_by_role("link", name="Open a fresh view").click()
    assert int(await page.locator("#page-revision").inner_text()) == seen + 1
    await _enable(page, "backup")
    await context.close()


def _post_to(path: str) -> Any:
    return lambda r: r.url.endswith(path) and r.request.method == "POST"


async def test_a_read_only_session_has_no_controls_and_is_refused(console: Console) -> None:
    context, page = await console.signed_in(CONTROL_TOKEN)
    await page.goto("/console/actions")
    await expect(page.get_by_role("note")).to_contain_text("Read-only session")
    await expect(page.locator('form[action="/console/actions"]')).to_have_count(0)
    await shot(page, "actions-read-only")

    before = await console.revision()
    csrf = await page.locator('input[name="csrf"]').first.input_value()
    forced = await page.request.post(
        "/console/actions",
        form={
            "csrf": csrf,
            "account": "primary",
            "action": "disable",
            "reason": "x",
            "revision": str(before),
        },
    )
    assert forced.status == 403
    assert "Read-only session" in await forced.text()
    assert await console.revision() == before
    await context.close()


async def test_a_form_without_the_sessions_csrf_token_is_refused(console: Console) -> None:
    context, page = await console.signed_in(ADMIN_TOKEN)
    await page.goto("/console/actions")
    before = await console.revision()
    await page.evaluate(
        "document.querySelectorAll('input[name=csrf]').forEach(i => { i.value = 'forged'; })"
    )
    card = page.get_by_role("region", name="primary")
    await card.get_by_label("Drain").check()
    await card.get_by_label("Reason").fill("a forged form")
    async with page.expect_response(_post_to("/console/actions")) as answer:
        await card.get_by_role("button", name="Apply to primary").click()
    assert (await answer.value).status == 403
    await expect(page.get_by_role("heading", name="Form refused")).to_be_visible()
    assert await console.revision() == before
    await context.close()


async def test_evidence_page_counts_outcomes(console: Console) -> None:
    gw = console.gateway
    minted = await gw.minted(dispatch_id="ev-1")
    assert (await gw.chat(minted["key"])).status_code == 200
    await gw.evidence_for(minted["mint_decision_id"])
    context, page = await console.signed_in(CONTROL_TOKEN)
    await page.goto("/console/evidence")
    await page.get_by_label("Outcome").select_option("success")
    await page.get_by_role("button", name="Filter").click()
    await expect(page).to_have_url(
        f"{gw.url}/console/evidence?account=&model=&outcome=success&within="
    )
    rows = page.locator("table:not(.counts) tbody tr")
    await expect(rows.first).to_contain_text("success")
    assert "upstream-error" not in await page.locator("table:not(.counts) tbody").inner_text()
    last_hour = page.locator("table.counts tr", has_text="success").get_by_role("cell").nth(1)
    assert int(await last_hour.inner_text()) >= 1
    await shot(page, "evidence")
    await context.close()


async def test_spend_shows_a_tenant_budget_and_the_day_chart_drawn_in_the_page(
    console: Console,
) -> None:
    gw = console.gateway
    revision = await console.revision()
    budget = await gw.client.post(
        f"{gw.url}/control/v2/tenants/spend/browser/budget",
        json={
            "reason": "browser",
            "expected_revision": revision,
            "period": "day",
            "max_tokens": 64,
        },
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert budget.status_code == 200, budget.text
    minted = await gw.minted(tenant="spend/browser", model="gpt-4o", dispatch_id="d-spend")
    assert (await gw.chat(minted["key"], model="gpt-4o")).status_code == 200
    (row,) = await gw.evidence_for(minted["mint_decision_id"])
    spent = row["input_tokens"] + row["output_tokens"]

    async def counted() -> bool:
        # a request served before the proxy learnt the new budget is counted when the
        # budget change settles (~4 s, again at ~8 s: docs/spend.md): the page shows totals
        answer = await gw.client.get(
            f"{gw.url}/control/v2/tenants/spend/browser/budget",
            headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
        )
        return bool(answer.json()["spent"]["tokens"] == spent)

    await eventually(counted, within_s=15.0)
    context, page = await console.signed_in(CONTROL_TOKEN)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    await page.get_by_role("link", name="Spend").click()
    await expect(page).to_have_url(f"{gw.url}/console/spend")
    budget_row = page.locator("#budgets tr", has_text="spend/browser")
    await expect(budget_row).to_contain_text(f"{100 * spent / 64:.0f} %")
    chart = page.get_by_role("img", name="Spend per day")
    await expect(chart).to_be_visible()
    assert await chart.locator("rect").count() >= 1
    by_tenant = page.locator("table.usage[data-group=tenant]").first
    await expect(by_tenant).to_contain_text("spend/browser")
    assert all(url.startswith(gw.url) for url in requests)  # nothing from another origin
    await shot(page, "spend")
    await context.close()


async def test_an_operator_walks_keys_budgets_dispatches_and_traffic(console: Console) -> None:
    gw = console.gateway
    walked = await gw.minted(tenant="walk/ops", dispatch_id="walk-1", model="gpt-4o")
    assert (await gw.chat(walked["key"], model="gpt-4o")).status_code == 200
    await gw.evidence_for(walked["mint_decision_id"])
    context, page = await console.signed_in(ADMIN_TOKEN)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))

    # Keys: only this tenant's key, revoked with its button; the proxy refuses it at once
    await page.get_by_role("link", name="Keys").click()
    await page.get_by_label("Tenant").fill("walk/ops")
    await page.get_by_role("button", name="Show keys").click()
    rows = page.locator("#live-keys tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("walk-1")
    await shot(page, "keys")
    await page.get_by_role("button", name=f"Revoke {walked['key_id']}").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Revoked {walked['key_id']}")
    await expect(page.locator("#live-keys tbody")).to_contain_text("No live key matches")
    refused = await gw.chat(walked["key"], model="gpt-4o")
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "key-revoked"

    # Spend: set a budget, then clear it; both are audit records
    await page.get_by_role("link", name="Spend").click()
    form = page.get_by_role("form", name="Set a tenant budget")
    await form.get_by_label("Tenant").fill("walk/ops")
    await form.get_by_label("Period").select_option("day")
    await form.get_by_label("Max tokens").fill("5000")
    await form.get_by_label("Reason").fill("walk cap")
    await form.get_by_role("button", name="Set budget").click()
    await expect(page.get_by_role("status")).to_contain_text(
        "walk/ops has a budget per day of at most 5000 tokens"
    )
    budget_row = page.locator("#budgets tr", has_text="walk/ops")
    await expect(budget_row).to_contain_text("5000")
    await shot(page, "spend-budget-set")
    await budget_row.get_by_label("Reason for clearing walk/ops").fill("walk over")
    await budget_row.get_by_role("button", name="Clear walk/ops").click()
    await expect(page.get_by_role("status")).to_contain_text("walk/ops has no budget any more")
    await expect(page.locator("#budgets tr", has_text="walk/ops")).to_have_count(0)
    await page.get_by_role("link", name="Audit").click()
    await expect(page.get_by_role("cell", name="walk cap")).to_be_visible()
    await expect(page.get_by_role("cell", name="walk over")).to_be_visible()

    # Dispatches: this tenant's, then into its chain
    await page.get_by_role("link", name="Dispatches").click()
    recent = page.get_by_role("search", name="Recent dispatches")
    await recent.get_by_label("Only tenant").fill("walk/ops")
    await recent.get_by_label("Decided").select_option("selected")
    await recent.get_by_label("Within").select_option("15m")
    await recent.get_by_role("button", name="Show dispatches").click()
    listed = page.locator("#recent-dispatches tbody tr")
    await expect(listed).to_have_count(1)
    await shot(page, "dispatches-recent")
    await listed.get_by_role("link", name="walk-1").click()
    await expect(page.locator("li.decision")).to_have_count(1)
    await expect(page.locator("li.decision")).to_contain_text("revoked")

    # Traffic: a chart per account, drawn in the page
    await page.get_by_role("link", name="Traffic").click()
    chart = page.get_by_role("img", name="Traffic of primary")
    await expect(chart).to_be_visible()
    assert await chart.locator("rect.requests").count() >= 60
    served = page.locator('#traffic-totals tr[data-account="primary"] td').first
    assert int(await served.inner_text()) >= 1
    await shot(page, "traffic")
    assert all(url.startswith(gw.url) for url in requests)  # nothing from another origin
    await context.close()
