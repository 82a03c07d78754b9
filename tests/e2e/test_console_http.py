"""The console over plain HTTP, in embedded and production mode: who gets in, which forms are
accepted, and that bad input is a 4xx page, never a 5xx. (The browser tests drive the pages.)"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.fixtures.console import csrf_of, revision, signed_in
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    CONTROL_TOKEN,
    Gateway,
    gateway_env,
    in_process_control_plane,
)
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

PAGES = [
    "/console/pool",
    "/console/pool/grid",
    "/console/actions",
    "/console/dispatches",
    "/console/evidence",
    "/console/traffic",
    "/console/keys",
    "/console/spend",
    "/console/audit",
]


async def test_without_a_session_every_page_redirects_to_sign_in(gateway: Gateway) -> None:
    async with local_client(base_url=gateway.url) as client:
        for path in PAGES:
            answer = await client.get(path)
            assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
        posted = await client.post("/console/actions", data={"account": "openai-main"})
        assert posted.status_code == 303
        client.cookies.set("leasegate_console", "e30.AAAA", path="/console")
        forged = await client.get("/console/pool")
        assert forged.status_code == 303
        page = await client.get("/console/sign-in")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_sign_in_sets_a_strict_http_only_cookie_that_holds_no_token(
    gateway: Gateway,
) -> None:
    async with local_client(base_url=gateway.url) as client:
        wrong = await client.post("/console/sign-in", data={"token": "guess"})
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers
        right = await client.post("/console/sign-in", data={"token": ADMIN_TOKEN})
        cookie = right.headers["set-cookie"]
        assert right.status_code == 303
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/console", "Max-Age=28800"):
            assert attribute in cookie
        assert ADMIN_TOKEN not in cookie
        for path in PAGES:
            page = await client.get(path)
            assert page.status_code == 200, path
            assert ADMIN_TOKEN not in page.text


async def test_repeated_wrong_tokens_from_one_address_are_refused_for_a_while(
    gateway: Gateway,
) -> None:
    """Five wrong tokens from one address: the sixth attempt, even with the right token, is
    a 429 with Retry-After and no cookie; another address signs in as usual."""

    def client_from(address: str) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(local_address=address)
        return httpx.AsyncClient(base_url=gateway.url, transport=transport)

    async with client_from("127.0.0.2") as guesser, client_from("127.0.0.3") as operator:
        for attempt in range(5):
            wrong = await guesser.post("/console/sign-in", data={"token": f"guess-{attempt}"})
            assert wrong.status_code == 401
        refused = await guesser.post("/console/sign-in", data={"token": ADMIN_TOKEN})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "set-cookie" not in refused.headers
        assert "Too many failed sign-ins" in refused.text
        assert ADMIN_TOKEN not in refused.text
        signed = await operator.post("/console/sign-in", data={"token": ADMIN_TOKEN})
        assert signed.status_code == 303
        assert (await operator.get("/console/pool")).status_code == 200


async def test_an_operator_changes_an_account_and_a_stale_form_is_refused(
    gateway: Gateway,
) -> None:
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        csrf, seen = await csrf_of(client)
        form = {"csrf": csrf, "account": "claude-main", "revision": str(seen)}
        drain = {**form, "action": "drain", "reason": "<script>alert(1)</script>"}
        done = await client.post("/console/actions", data=drain)
        assert done.status_code == 303, done.text
        view = await gateway.control_get("/accounts/claude-main")
        assert (view["admin_state"], view["revision"]) == ("draining", seen + 1)
        audit = await gateway.control_get("/audit")
        assert audit["records"][-1]["actor"] == "ops-alice"
        for path in ("/console/pool", "/console/actions", "/console/audit"):
            shown = (await client.get(path)).text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown  # escaped, never markup
            assert "<script>alert" not in shown

        enable = {**form, "action": "enable", "reason": "r"}
        again = await client.post("/console/actions", data=enable)
        assert again.status_code == 409
        assert f"revision <strong>{seen}</strong>" in again.text
        assert "Open a fresh view" in again.text
        assert await revision(gateway) == seen + 1


async def test_forms_without_the_csrf_token_or_from_a_read_only_session_are_refused(
    gateway: Gateway,
) -> None:
    before = await revision(gateway)
    async with signed_in(gateway, ADMIN_TOKEN) as admin:
        _, seen = await csrf_of(admin)
        form = {"account": "openai-main", "action": "disable", "reason": "r", "revision": str(seen)}
        for csrf in (None, "", "forged"):
            body = form if csrf is None else {**form, "csrf": csrf}
            refused = await admin.post("/console/actions", data=body)
            assert refused.status_code == 403
            assert "Form refused" in refused.text
        signed_out = await admin.post("/console/sign-out", data={"csrf": "forged"})
        assert signed_out.status_code == 403
    async with signed_in(gateway, CONTROL_TOKEN) as reader:
        page = await reader.get("/console/actions")
        assert 'action="/console/actions"' not in page.text
        assert "Read-only session" in page.text
        token = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert token is not None
        refused = await reader.post("/console/actions", data={**form, "csrf": token.group(1)})
        assert refused.status_code == 403
    assert await revision(gateway) == before


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/console/dispatches?tenant=acme/web&dispatch_id=%00", None),
        ("/console/dispatches?dispatch_id=d-1", None),
        ("/console/dispatches?tenant=a%20b", None),
        ("/console/dispatches?outcome=granted", None),
        ("/console/dispatches?within=forever", None),
        ("/console/evidence?outcome=everything", None),
        ("/console/evidence?account=nobody", None),
        ("/console/actions", {"account": "nobody", "action": "drain", "reason": "r"}),
        ("/console/actions", {"account": "openai-main", "action": "explode", "reason": "r"}),
        ("/console/actions", {"account": "openai-main", "action": "drain", "reason": " "}),
        ("/console/actions", {"account": "openai-main", "action": "drain", "reason": "r" * 600}),
        ("/console/actions", {"account": "openai-main", "action": "drain", "revision": "-1"}),
    ],
)
async def test_bad_input_is_a_4xx_page(
    gateway: Gateway, path: str, data: dict[str, str] | None
) -> None:
    async with signed_in(gateway, ADMIN_TOKEN) as client:
        if data is None:
            answer = await client.get(path)
        else:
            csrf, seen = await csrf_of(client)
            body = {"csrf": csrf, "revision": str(seen), "reason": "r", **data}
            answer = await client.post(path, data=body)
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("text/html")
        many = await client.post("/console/actions", content="&".join(["a=1"] * 50))
        assert many.status_code == 403
        binary = await client.post("/console/sign-in", content=b"\xff\xfe token=\x00")
        assert binary.status_code == 401


async def test_the_control_plane_process_app_serves_the_console(tmp_path: Path) -> None:
    """`leasegate control-plane` (production mode, no proxy in the process) has it too."""
    async with production_stores() as stores:
        env = gateway_env(tmp_path, [], **stores)
        async with (
            in_process_control_plane(env) as url,
            local_client(base_url=url) as client,
        ):
            assert (await client.get("/console/audit")).status_code == 303
            signed = await client.post("/console/sign-in", data={"token": ADMIN_TOKEN})
            assert signed.status_code == 303
            audit = await client.get("/console/audit")
            assert audit.status_code == 200
            assert "No records: every account is enabled." in audit.text
            script = await client.get("/console/static/console.js")
            assert script.status_code == 200
            assert "setInterval" in script.text


async def test_wrong_bearer_tokens_share_the_sign_in_budget_of_their_address(
    gateway: Gateway,
) -> None:
    """Wrong bearer tokens on the control API count as failed sign-ins do: after 5 from one
    address (here 3 console sign-ins and 2 API calls), the API answers that address 429 with
    Retry-After and the error envelope, even for the right token, before comparing it; another
    address is served."""

    def client_from(address: str) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(local_address=address)
        return httpx.AsyncClient(base_url=gateway.url, transport=transport)

    right = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
    async with client_from("127.0.0.4") as guesser, client_from("127.0.0.5") as orchestrator:
        for attempt in range(3):
            page = await guesser.post("/console/sign-in", data={"token": f"guess-{attempt}"})
            assert page.status_code == 401
        for attempt in range(2):
            wrong = await guesser.get(
                "/control/v2/accounts", headers={"Authorization": f"Bearer guess-{attempt}"}
            )
            assert wrong.status_code == 401
        refused = await guesser.get("/control/v2/accounts", headers=right)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too-many-failed-authentications"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert (
            await guesser.post("/console/sign-in", data={"token": ADMIN_TOKEN})
        ).status_code == 429
        assert (await orchestrator.get("/control/v2/accounts", headers=right)).status_code == 200
