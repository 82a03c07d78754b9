"""Hostile input at the control plane: a 4xx envelope that never echoes the value, never a
retryable 5xx for input that cannot succeed, on SQLite and Postgres (issue 10)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fixtures.gateways import ADMIN_TOKEN, Gateway

NEST = 100_000
MINT = {"tenant": "acme/web", "dispatch_id": "d-hostile", "model": "gpt-4o"}


def _assert_refused(
    response: httpx.Response, status: int, code: str | None = None
) -> dict[str, object]:
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert isinstance(error, dict)
    if code is not None:
        assert error["code"] == code
    assert "gpt-x" not in error["message"]
    return error


async def _post_json(
    gateway: Gateway, path: str, body: dict[str, object], headers: dict[str, str]
) -> httpx.Response:
    """JSON with every non-ASCII character escaped, lone surrogates included."""
    return await gateway.client.post(
        f"{gateway.url}{path}",
        content=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json"},
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "gpt-x\u0000"},
        {"model": "gpt-x\ud800"},
        {"model": "g" * 201},
        {"role": "imp\u0000lementer"},
        {"role": "gpt-x\ud800"},
        {"role": "r" * 101},
        {"retry_of_mint_decision_id": "m" * 65},
        {"retry_of_mint_decision_id": "m" * 100},
        {"supersedes_mint_decision_id": "m" * 80},
        {"retry_of_mint_decision_id": "md_\u0000"},
        {"tenant": "t\u0000"},
    ],
)
async def test_unstorable_mint_fields_are_400(gateway: Gateway, fields: dict[str, str]) -> None:
    response = await _post_json(
        gateway, "/control/v2/keys", {**MINT, **fields}, gateway.control_headers
    )
    _assert_refused(response, 400, "invalid-request")
    # and the service is unharmed
    assert (await gateway.mint(dispatch_id="after")).status_code == 201


async def test_unstorable_state_change_fields_are_400(gateway: Gateway) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for fields in ({"reason": "leak\u0000"}, {"reason": "x\ud800"}, {"on_behalf_of": "a\u0000"}):
        body = {"state": "draining", "expected_revision": 0, "reason": "r", **fields}
        response = await _post_json(gateway, "/control/v2/accounts/openai-main/state", body, admin)
        _assert_refused(response, 400, "invalid-request")


async def test_unstorable_tenant_budget_fields_are_400(gateway: Gateway) -> None:
    # the same audited fields as a state change, bounded and checked by the same types
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for fields in ({"reason": "leak\u0000"}, {"reason": "x\ud800"}, {"on_behalf_of": "a\u0000"}):
        body = {"expected_revision": 0, "period": "day", "max_tokens": 10, "reason": "r", **fields}
        response = await _post_json(gateway, "/control/v2/tenants/acme/budget", body, admin)
        _assert_refused(response, 400, "invalid-request")


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("GET", "/control/v2/keys/k%00x", "key-not-found"),
        ("DELETE", "/control/v2/keys/k%00x", "key-not-found"),
        ("POST", "/control/v2/keys/k%00x/renew", "key-not-found"),
        ("GET", "/control/v2/keys/" + "k" * 65, "key-not-found"),
        ("GET", "/control/v2/decisions/md_%00", "decision-not-found"),
        ("GET", "/control/v2/decisions/%2e%2e%2f", None),
        ("GET", "/control/v2/decisions/%ED%A0%80", "decision-not-found"),
        ("GET", "/control/v2/accounts/a%00b", "account-not-found"),
        ("GET", "/control/v2/keys/", None),
    ],
)
async def test_ids_that_cannot_exist_are_404(
    gateway: Gateway, method: str, path: str, code: str | None
) -> None:
    response = await gateway.client.request(
        method, f"{gateway.url}{path}", headers=gateway.control_headers
    )
    _assert_refused(response, 404, code)
    assert "location" not in response.headers


@pytest.mark.parametrize("since", ["0.5", "1700000000", "2026-01-01", "2026-01-01T00:00:00"])
async def test_since_must_be_a_zoned_time(gateway: Gateway, since: str) -> None:
    response = await gateway.client.get(
        f"{gateway.url}/control/v2/evidence",
        params={"since": since},
        headers=gateway.control_headers,
    )
    _assert_refused(response, 400, "invalid-request")
    good = await gateway.client.get(
        f"{gateway.url}/control/v2/evidence",
        params={"since": "2026-01-01T00:00:00Z"},
        headers=gateway.control_headers,
    )
    assert good.status_code == 200


async def test_405_names_the_allowed_methods(gateway: Gateway) -> None:
    response = await gateway.client.put(
        f"{gateway.url}/control/v2/keys", headers=gateway.control_headers
    )
    _assert_refused(response, 405, "method-not-allowed")
    assert "POST" in response.headers["allow"]
    proxy = await gateway.client.get(f"{gateway.url}/v1/chat/completions")
    _assert_refused(proxy, 405, "method-not-allowed")
    assert "POST" in proxy.headers["allow"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/control/v2/keys/k_1", {"GET", "DELETE"}),
        ("PATCH", "/control/v2/tenants/acme/budget", {"GET", "POST"}),
    ],
)
async def test_405_on_a_two_method_path_names_every_method(
    gateway: Gateway, method: str, path: str, allowed: set[str]
) -> None:
    # one route per method on the same path: the answer names the methods of all of them
    response = await gateway.client.request(
        method, f"{gateway.url}{path}", headers=gateway.control_headers
    )
    _assert_refused(response, 405, "method-not-allowed")
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed


async def test_chunked_body_over_the_limit_is_413(gateway: Gateway) -> None:
    async def ten_mb() -> AsyncIterator[bytes]:
        yield b'{"tenant": "'
        for _ in range(10 * 16):
            yield b"x" * 65536
        yield b'"}'

    response = await gateway.client.post(
        f"{gateway.url}/control/v2/keys",
        content=ten_mb(),
        headers={**gateway.control_headers, "Content-Type": "application/json"},
    )
    _assert_refused(response, 413, "invalid-request")


@pytest.mark.parametrize(
    "body",
    [
        b"[" * NEST + b"]" * NEST,
        b'{"tenant": ' + b"[" * NEST + b"]" * NEST + b"}",
        b'{"a":' * NEST + b"1" + b"}" * NEST,
    ],
)
async def test_deep_json_is_400_on_every_body_route(gateway: Gateway, body: bytes) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    for path, headers in (
        ("/control/v2/keys", {**gateway.control_headers, "Content-Type": "application/json"}),
        (
            "/control/v2/keys/k0123/renew",
            {**gateway.control_headers, "Content-Type": "application/json"},
        ),
        ("/control/v2/accounts/openai-main/state", admin),
    ):
        response = await gateway.client.post(f"{gateway.url}{path}", content=body, headers=headers)
        assert response.status_code in (400, 404), (path, response.text[:200])
        assert "error" in response.json()


async def test_messages_never_echo_values(gateway: Gateway) -> None:
    unknown = await gateway.mint(**{**MINT, "model": "gpt-x-secretish"})
    error = _assert_refused(unknown, 404, "model-not-served")
    assert "secretish" not in str(error["message"])
    extra = await _post_json(
        gateway, "/control/v2/keys", {**MINT, "gpt-x\u0000 weird field": 1}, gateway.control_headers
    )
    _assert_refused(extra, 400, "invalid-request")


async def test_the_openapi_document_lists_every_route_with_its_refusals(gateway: Gateway) -> None:
    """A route added without its refusals would make /openapi.json fail for every client."""
    response = await gateway.client.get(f"{gateway.url}/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/control/v2/keys", "/control/v2/usage", "/control/v2/tenants/{tenant}/budget"):
        assert path in paths
    for operations in paths.values():
        for operation in operations.values():
            assert "400" in operation["responses"]


async def test_the_openapi_document_describes_every_answer_body(gateway: Gateway) -> None:
    """Every success that has a body names its wire model (`leasegate.wire`), so a client
    generated from the document reads what the control plane really sends."""
    document = (await gateway.client.get(f"{gateway.url}/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        if not path.startswith("/control/v2"):
            continue
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                schema = response["content"]["application/json"]["schema"]
                name = schema["$ref"].rsplit("/", 1)[-1]
                assert schemas[name]["properties"], (method, path, status)
    mint = document["paths"]["/control/v2/keys"]["post"]["responses"]
    assert {"200", "201"} <= set(mint)  # a replay answers 200 with the same body
