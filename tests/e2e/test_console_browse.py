"""The console's Keys page, budget forms, recent dispatches and traffic chart over HTTP, on
SQLite and on Postgres: what they show, what their forms change, and that bad input or a
missing CSRF token is refused (a 4xx page, never a 5xx, nothing changed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.console import csrf_of, revision, signed_in
from tests.fixtures.databases import create_database, drop_database, pg_url
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    CONTROL_TOKEN,
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.services import production_stores, require_postgres


def _key_rows(html: str) -> dict[str, str]:
    """Each live key's id and its row's text."""
    body = html.split('<table id="live-keys">', 1)[1].split("</table>", 1)[0]
    return {
        key: re.sub(r"<[^>]+>", " ", row)
        for key, row in re.findall(r'<tr data-key="([^"]+)">(.*?)</tr>', body, re.S)
    }


async def test_keys_lists_live_keys_by_tenant_and_revokes_one_for_every_proxy(
    gateway: Gateway,
) -> None:
    web = await gateway.minted(tenant="acme/web", dispatch_id="k-1")
    batch = await gateway.minted(tenant="acme/batch", dispatch_id="k-2")
    gone = await gateway.minted(tenant="acme/web", dispatch_id="k-3")
    assert (await gateway.revoke(gone["key_id"])).status_code == 204
    assert (await gateway.chat(web["key"])).status_code == 200
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        html = (await client.get("/console/keys")).text
        shown = _key_rows(html)
        assert {web["key_id"], batch["key_id"]} <= set(shown)
        assert gone["key_id"] not in shown  # revoked: not live
        assert web["key"] not in html  # never the secret
        assert "openai-main" in shown[web["key_id"]]
        assert "k-1" in shown[web["key_id"]]
        only_web = _key_rows((await client.get("/console/keys?tenant=acme/web")).text)
        assert set(only_web) == {web["key_id"]}

        csrf, _ = await csrf_of(client)
        answer = await client.post(
            "/console/keys/revoke",
            data={"csrf": csrf, "key_id": web["key_id"], "tenant": "acme/web"},
        )
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/console/keys?tenant=acme%2Fweb&revoked=")
        after = await client.get(answer.headers["location"])
        assert f"Revoked <code>{web['key_id']}</code> (acme/web, k-1) at " in after.text
        live = await client.get(f"/console/keys?revoked={batch['key_id']}")
        assert "Revoked" not in live.text  # only a key that has ended is said to be
        assert web["key_id"] not in _key_rows(after.text)
    refused = await gateway.chat(web["key"])  # the proxy was told
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "key-revoked"
    assert (await gateway.control_get(f"/keys/{web['key_id']}"))["state"] == "revoked"


async def test_revoking_needs_the_csrf_token_and_an_operator_session(gateway: Gateway) -> None:
    minted = await gateway.minted(tenant="acme/web", dispatch_id="k-csrf")
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        forged = await client.post(
            "/console/keys/revoke", data={"csrf": "forged", "key_id": minted["key_id"]}
        )
        missing = await client.post("/console/keys/revoke", data={"key_id": minted["key_id"]})
        csrf, _ = await csrf_of(client)
        unknown = await client.post(
            "/console/keys/revoke", data={"csrf": csrf, "key_id": "k_never_minted"}
        )
        malformed = await client.post(
            "/console/keys/revoke", data={"csrf": csrf, "key_id": "not a key"}
        )
    assert (forged.status_code, missing.status_code) == (403, 403)
    assert "Form refused" in forged.text
    assert unknown.status_code == 404
    assert malformed.status_code == 400
    async with signed_in(gateway, CONTROL_TOKEN) as reader:
        page = (await reader.get("/console/keys")).text
        assert 'action="/console/keys/revoke"' not in page
        csrf, _ = await csrf_of(reader)
        forced = await reader.post(
            "/console/keys/revoke", data={"csrf": csrf, "key_id": minted["key_id"]}
        )
    assert forced.status_code == 403
    assert "Read-only session" in forced.text
    assert (await gateway.control_get(f"/keys/{minted['key_id']}"))["state"] == "live"


async def test_an_operator_sets_and_clears_a_budget_with_the_apis_audit_record(
    gateway: Gateway,
) -> None:
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        csrf, seen = await csrf_of(client)
        form = {"csrf": csrf, "tenant": "acme/web", "revision": str(seen), "reason": "q4 cap"}
        answer = await client.post(
            "/console/spend/budget",
            data={**form, "action": "set", "period": "month", "max_tokens": "1000"},
        )
        assert answer.status_code == 303, answer.text
        done = await client.get(answer.headers["location"])
        assert "has a budget per month of at most 1000 tokens" in done.text
        read = await gateway.control_get("/tenants/acme/web/budget")
        assert read["budget"] == {"period": "month", "max_tokens": 1000, "max_cost": None}
        audit = await gateway.control_get("/audit")
        last = audit["records"][-1]
        assert (last["actor"], last["reason"], last["tenant"]) == (
            "ops-alice",
            "q4 cap",
            "acme/web",
        )

        stale = await client.post(
            "/console/spend/budget", data={**form, "action": "clear", "reason": "old view"}
        )
        assert stale.status_code == 409  # the chain moved since `seen`
        cleared = await client.post(
            "/console/spend/budget",
            data={**form, "action": "clear", "revision": str(seen + 1), "reason": "done"},
        )
        assert cleared.status_code == 303
        assert "has no budget any more" in (await client.get(cleared.headers["location"])).text
        audit_page = (await client.get("/console/audit")).text
        assert "budget cleared" in audit_page
    assert (await gateway.control_get("/tenants/acme/web/budget"))["budget"] is None
    assert await revision(gateway) == seen + 2


async def test_a_bad_budget_form_is_a_400_page_and_changes_nothing(gateway: Gateway) -> None:
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        csrf, seen = await csrf_of(client)
        form = {"csrf": csrf, "tenant": "acme/web", "revision": str(seen), "reason": "r"}
        bad = [
            {**form, "action": "set", "period": "month"},  # no bound
            {**form, "action": "set", "period": "week", "max_tokens": "5"},
            {**form, "action": "set", "period": "day", "max_tokens": "-5"},
            {**form, "action": "set", "period": "day", "max_cost": "1,50"},
            {**form, "action": "set", "period": "day", "max_tokens": "5", "revision": "x"},
            {**form, "action": "set", "period": "day", "max_tokens": "5", "reason": ""},
            {**form, "action": "set", "period": "day", "max_tokens": "5", "tenant": "a b"},
        ]
        for fields in bad:
            answer = await client.post("/console/spend/budget", data=fields)
            assert answer.status_code == 400, (fields, answer.text)
            assert "Not done" in answer.text
        missing = await client.post(
            "/console/spend/budget",
            data={k: v for k, v in bad[1].items() if k != "csrf"} | {"max_tokens": "5"},
        )
        assert missing.status_code == 403
    async with signed_in(gateway, CONTROL_TOKEN) as reader:
        csrf, _ = await csrf_of(reader)
        forced = await reader.post(
            "/console/spend/budget",
            data={**form, "csrf": csrf, "action": "set", "period": "day", "max_tokens": "5"},
        )
        assert forced.status_code == 403
    assert await revision(gateway) == seen


async def test_bad_filter_values_are_400_pages(gateway: Gateway) -> None:
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        for path in [
            "/console/keys?tenant=a%20b",
            "/console/keys?account=nobody",
            "/console/keys?tenant=" + "a" * 201,
            "/console/dispatches?tenant=%00",
            "/console/dispatches?outcome=granted",
            "/console/dispatches?within=forever",
            "/console/traffic?within=7d",
        ]:
            answer = await client.get(path)
            assert answer.status_code == 400, (path, answer.text)
            assert 'role="alert"' in answer.text  # the page says what is wrong
            assert answer.headers["content-type"].startswith("text/html")
        for path in ("/console/spend?done=x", "/console/traffic?within=%ff%fe"):
            answer = await client.get(path)
            assert 400 <= answer.status_code < 500, (path, answer.text)


def _dispatch_rows(html: str) -> dict[str, list[str]]:
    """Each listed dispatch's id and its cells' text."""
    body = html.split('<table id="recent-dispatches">', 1)[1].split("</table>", 1)[0]
    return {
        dispatch: [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for dispatch, row in re.findall(r'<tr data-dispatch="([^"]+)">(.*?)</tr>', body, re.S)
    }


async def test_recent_dispatches_filter_by_tenant_and_outcome_and_link_to_their_chain(
    gateway: Gateway,
) -> None:
    held = await gateway.minted(tenant="acme/web", dispatch_id="browse-1")
    again = await gateway.mint(tenant="acme/web", dispatch_id="browse-1")  # lease held: refused
    assert again.status_code == 409, again.text
    await gateway.minted(tenant="beta/ci", dispatch_id="browse-2")
    assert (await gateway.chat(held["key"])).status_code == 200
    (row,) = await gateway.evidence_for(held["mint_decision_id"])
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        every = _dispatch_rows((await client.get("/console/dispatches")).text)
        assert {"browse-1", "browse-2"} <= set(every)
        tenant, _, decisions, selected, refused, hop, _, _ = every["browse-1"]
        assert (tenant, decisions, selected, refused, hop) == ("acme/web", "2", "1", "1", "0")
        html = (await client.get("/console/dispatches?tenant=acme/web&within=15m")).text
        assert set(_dispatch_rows(html)) == {"browse-1"}
        assert 'href="/console/dispatches?tenant=acme%2Fweb&amp;dispatch_id=browse-1"' in html
        refusals = (await client.get("/console/dispatches?outcome=refused&within=24h")).text
        assert set(_dispatch_rows(refusals)) == {"browse-1"}
        assert _dispatch_rows(refusals)["browse-1"][2:5] == ["1", "0", "1"]
        chain = (await client.get("/console/dispatches?tenant=acme/web&dispatch_id=browse-1")).text
        assert chain.count('class="decision ') == 2
        assert f'id="req-{row["request_id"]}"' in chain
        evidence = (await client.get("/console/evidence?within=15m")).text
        anchor = f"/console/dispatches?decision={held['mint_decision_id']}#req-{row['request_id']}"
        assert f'href="{anchor}"' in evidence


async def test_a_dispatchs_chain_shows_whether_its_affinity_was_followed(
    gateway: Gateway,
) -> None:
    first = await gateway.minted(tenant="acme/web", dispatch_id="aff-1", affinity="session-3")
    assert (await gateway.revoke(first["key_id"])).status_code == 204
    await gateway.minted(tenant="acme/web", dispatch_id="aff-2", affinity="session-3")
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        before = (await client.get("/console/dispatches?tenant=acme/web&dispatch_id=aff-1")).text
        after = (await client.get("/console/dispatches?tenant=acme/web&dispatch_id=aff-2")).text
    assert '<dd class="affinity">session-3: nothing served it yet</dd>' in before
    assert '<dd class="affinity">session-3: followed</dd>' in after


async def test_traffic_counts_requests_and_failures_per_account_as_inline_svg(
    gateway: Gateway,
) -> None:
    served = await gateway.minted(tenant="acme/web", dispatch_id="traffic-1")
    for _ in range(2):
        assert (await gateway.chat(served["key"])).status_code == 200
    await gateway.evidence_for(served["mint_decision_id"], count=2)
    async with signed_in(gateway, CONTROL_TOKEN) as client:
        html = (await client.get("/console/traffic?within=15m")).text
        bad = await client.get("/console/traffic?within=forever")
    totals = re.search(r'<tr data-account="openai-main">(.*?)</tr>', html, re.S)
    assert totals is not None
    cells = [
        re.sub(r"<[^>]+>", "", c).strip()
        for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", totals.group(1))
    ]
    assert cells == ["openai-main", "2", "0", "0 %"]
    chart = re.search(
        r'<figure class="chart traffic" data-account="openai-main">(.*?)</figure>', html, re.S
    )
    assert chart is not None
    # 30 s buckets over 15 min: 31 when the range starts mid-bucket
    assert len(re.findall(r'<rect class="requests"', chart.group(1))) in (30, 31)
    assert "2 requests, 0 failed" in chart.group(1)
    assert "Traffic of claude-main: 0 requests" in html  # an idle account still has its chart
    assert bad.status_code == 400
    assert "Unknown filter" in bad.text


@pytest.mark.postgres
@pytest.mark.redis
async def test_a_page_whose_database_is_gone_is_a_503_page_the_api_an_envelope(
    tmp_path: Path,
) -> None:
    require_postgres()
    name = await create_database(migrated=True)
    try:
        async with (
            production_stores(pg_url(name)) as stores,
            MockUpstream() as upstream,
        ):
            accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})]
            env = gateway_env(tmp_path, accounts, **stores)
            async with in_process_gateway(env, [upstream]) as gateway:
                async with signed_in(gateway, ADMIN_TOKEN) as client:
                    assert (await client.get("/console/keys")).status_code == 200
                    await drop_database(name)
                    for path in ("/console/keys", "/console/dispatches", "/console/traffic"):
                        down = await client.get(path)
                        assert down.status_code == 503, (path, down.text)
                        assert down.headers["content-type"].startswith("text/html")
                        assert "Store unavailable" in down.text
                        assert down.headers["retry-after"] == "2"
                api = await gateway.client.get(
                    f"{gateway.url}/control/v2/evidence", headers=gateway.control_headers
                )
                assert api.status_code == 503
                assert api.json()["error"]["code"] == "unavailable"
    finally:
        await drop_database(name)
