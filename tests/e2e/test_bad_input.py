"""Bad input of any shape gets a 4xx with the envelope, never a 5xx (SPEC §5 invariant 8)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.gateways import ADMIN_TOKEN, Gateway

CONTROL_ROUTES = [
    ("POST", "/control/v2/keys"),
    ("POST", "/control/v2/keys/knope/renew"),
    ("DELETE", "/control/v2/keys/knope"),
    ("GET", "/control/v2/keys/knope"),
    ("GET", "/control/v2/decisions/md_nope"),
    ("GET", "/control/v2/evidence"),
    ("GET", "/control/v2/accounts"),
    ("GET", "/control/v2/accounts/nope"),
]
PROXY_ROUTES = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/messages",
]


def _assert_envelope(status: int, body: dict[str, object], code: str | None = None) -> None:
    assert 400 <= status < 500, (status, body)
    error = body["error"]
    assert isinstance(error, dict)
    assert isinstance(error["code"], str)
    assert isinstance(error["message"], str)
    if code is not None:
        assert error["code"] == code


@pytest.mark.parametrize(("method", "path"), CONTROL_ROUTES)
async def test_control_routes_need_a_token(gateway: Gateway, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        response = await gateway.client.request(method, f"{gateway.url}{path}", headers=headers)
        _assert_envelope(response.status_code, response.json(), "unauthenticated")
        assert response.status_code == 401


async def test_admin_token_may_read_too(gateway: Gateway) -> None:
    response = await gateway.client.get(
        f"{gateway.url}/control/v2/accounts", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'"string"',
        b"{}",
        b'{"tenant": 5, "dispatch_id": "d", "model": "gpt-4o"}',
        b'{"tenant": "t", "dispatch_id": "d", "model": "gpt-4o", "account_id": "openai-main"}',
        b'{"tenant": "t", "dispatch_id": "d", "model": "gpt-4o", "ttl_s": -1}',
        b'{"tenant": "t", "dispatch_id": "d", "model": "gpt-4o", "ttl_s": 999999999}',
        b'{"tenant": "", "dispatch_id": "d", "model": "gpt-4o"}',
        b'{"tenant": "t", "dispatch_id": "d", "model": "gpt-4o", "retry_of_mint_decision_id": "a",'
        b' "supersedes_mint_decision_id": "b"}',
    ],
)
async def test_bad_mint_bodies(gateway: Gateway, body: bytes) -> None:
    response = await gateway.client.post(
        f"{gateway.url}/control/v2/keys",
        content=body,
        headers={**gateway.control_headers, "Content-Type": "application/json"},
    )
    _assert_envelope(response.status_code, response.json())


async def test_oversized_body_is_413(gateway: Gateway) -> None:
    huge = b'{"tenant": "' + b"x" * (9 * 1024 * 1024) + b'"}'
    minted = await gateway.minted(dispatch_id="huge-body")
    for path, auth in (
        ("/control/v2/keys", gateway.control_headers),
        ("/v1/chat/completions", {"Authorization": f"Bearer {minted['key']}"}),
    ):
        response = await gateway.client.post(
            f"{gateway.url}{path}",
            content=huge,
            headers={**auth, "Content-Type": "application/json"},
        )
        assert response.status_code == 413
        _assert_envelope(response.status_code, response.json(), "invalid-request")
    # the proxy's refusal is recorded like any other: one row
    (row,) = await gateway.evidence_for(minted["mint_decision_id"])
    assert (row["outcome"], row["refusal_reason"]) == ("refused", "invalid-request")
    # without a valid key the key is refused first, still with an envelope
    response = await gateway.client.post(
        f"{gateway.url}/v1/chat/completions",
        content=huge,
        headers={**gateway.control_headers, "Content-Type": "application/json"},
    )
    _assert_envelope(response.status_code, response.json(), "key-invalid")


async def test_bad_evidence_queries(gateway: Gateway) -> None:
    for query in (
        "limit=0",
        "limit=abc",
        "since=yesterday",
        "since=2026-01-01T00:00:00",
        "decision_id=%00",
    ):
        response = await gateway.client.get(
            f"{gateway.url}/control/v2/evidence?{query}", headers=gateway.control_headers
        )
        _assert_envelope(response.status_code, response.json())


@pytest.mark.parametrize("path", PROXY_ROUTES)
async def test_proxy_refuses_bad_keys_and_bodies(gateway: Gateway, path: str) -> None:
    no_key = await gateway.client.post(f"{gateway.url}{path}", json={"model": "gpt-4o"})
    _assert_envelope(no_key.status_code, no_key.json(), "key-invalid")
    bogus = await gateway.client.post(
        f"{gateway.url}{path}", json={"model": "gpt-4o"}, headers={"x-api-key": "lg_nope_nope"}
    )
    _assert_envelope(bogus.status_code, bogus.json(), "key-invalid")
    model = "claude-x" if path == "/v1/messages" else "gpt-4o"
    minted = await gateway.minted(model=model, dispatch_id=f"bad-{path}")
    auth = {"Authorization": f"Bearer {minted['key']}"}
    for body, headers in (
        (b"{nope", {"Content-Type": "application/json"}),
        (b"[1, 2]", {"Content-Type": "application/json"}),
        (b'{"model": 42}', {"Content-Type": "application/json"}),
        (b"model=gpt-4o", {"Content-Type": "application/x-www-form-urlencoded"}),
    ):
        response = await gateway.client.post(
            f"{gateway.url}{path}", content=body, headers={**auth, **headers}
        )
        _assert_envelope(response.status_code, response.json())


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.dictionaries(
        st.text(max_size=12),
        st.none() | st.integers() | st.text(max_size=12) | st.lists(st.integers(), max_size=3),
        max_size=6,
    )
)
async def test_any_json_object_mint_body_is_never_a_5xx(
    gateway: Gateway, body: dict[str, object]
) -> None:
    response = await gateway.client.post(
        f"{gateway.url}/control/v2/keys", json=body, headers=gateway.control_headers
    )
    assert response.status_code < 500 or response.json()["error"]["code"] in {
        "no-eligible-account",
        "account-state-unavailable",
    }
