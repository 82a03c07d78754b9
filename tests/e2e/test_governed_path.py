"""The governed path end to end, over real HTTP: mint, call through the proxy, evidence, revoke.
Runs in embedded mode (SQLite, in-process stores) and production mode (Postgres, Redis)."""

from __future__ import annotations

import json

from tests.fixtures.gateways import Gateway


async def test_mint_call_and_evidence_with_token_counts(gateway: Gateway) -> None:
    minted = await gateway.minted()
    assert minted["account_id"] == "openai-main"
    assert minted["served_model"] == "gpt-4o-2024-08-06"
    assert (minted["fallback_position"], minted["hop"], minted["passed_over"]) == (0, 0, [])
    assert minted["key"].startswith(f"lg_{minted['key_id']}_")

    response = await gateway.chat(minted["key"])
    assert response.status_code == 200, response.text
    assert response.headers["x-leasegate-account"] == "openai-main"
    assert response.headers["x-leasegate-served-model"] == "gpt-4o-2024-08-06"
    request_id = response.headers["x-leasegate-request-id"]

    seen = gateway.upstreams[0].requests[-1]
    assert seen.json is not None
    assert seen.json["model"] == "gpt-4o-2024-08-06"  # rewritten to the served name
    assert seen.headers["authorization"] == "Bearer sk-secret-openai-main"
    assert minted["key"] not in json.dumps(dict(seen.headers))  # the virtual key stays here

    (row,) = await gateway.evidence_for(minted["mint_decision_id"])
    assert row["request_id"] == request_id
    assert row["outcome"] == "success"
    assert row["qualifying"] is False
    assert row["input_tokens"] > 0
    assert row["output_tokens"] > 0
    assert row["account_id"] == "openai-main"
    assert row["served_model"] == "gpt-4o-2024-08-06"


async def test_stream_passes_through_and_records_usage_from_final_chunk(gateway: Gateway) -> None:
    minted = await gateway.minted()
    async with gateway.client.stream(
        "POST",
        f"{gateway.url}/v1/chat/completions",
        json={
            "model": "gpt-4o",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": minted["key"]},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    assert body.rstrip().endswith(b"data: [DONE]")
    (row,) = await gateway.evidence_for(minted["mint_decision_id"])
    assert row["stream"] is True
    assert row["outcome"] == "success"
    assert row["output_tokens"] > 0
    assert row["first_byte_ms"] is not None


async def test_anthropic_messages_usage(gateway: Gateway) -> None:
    minted = await gateway.minted(model="claude-x")
    response = await gateway.client.post(
        f"{gateway.url}/v1/messages",
        json={
            "model": "claude-x",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": minted["key"]},
    )
    assert response.status_code == 200, response.text
    assert b"message_stop" in response.content
    seen = gateway.upstreams[0].requests[-1]
    assert seen.headers["x-api-key"] == "sk-secret-claude-main"
    assert seen.headers["anthropic-version"]
    (row,) = await gateway.evidence_for(minted["mint_decision_id"])
    assert row["input_tokens"] > 0
    assert row["output_tokens"] > 0


async def test_revoked_key_is_refused_and_recorded(gateway: Gateway) -> None:
    minted = await gateway.minted()
    assert (await gateway.chat(minted["key"])).status_code == 200
    deleted = await gateway.revoke(minted["key_id"])
    assert deleted.status_code == 204
    again = await gateway.revoke(minted["key_id"])
    assert again.status_code == 204  # idempotent
    refused = await gateway.chat(minted["key"])
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "key-revoked"
    key = await gateway.control_get(f"/keys/{minted['key_id']}")
    assert key["state"] == "revoked"
    assert "secret" not in json.dumps(key)
    rows = await gateway.evidence_for(minted["mint_decision_id"], count=2)
    assert rows[0]["outcome"] == "refused"
    assert rows[0]["refusal_reason"] == "key-revoked"


async def test_one_live_lease_per_dispatch(gateway: Gateway) -> None:
    first = await gateway.minted()
    held = await gateway.mint()
    assert held.status_code == 409
    error = held.json()["error"]
    assert error["code"] == "dispatch-lease-held"
    assert error["disposition"] == "held"
    assert error["mint_decision_id"]
    await gateway.revoke(first["key_id"])
    assert (await gateway.mint()).status_code == 201


async def test_unknown_model_and_wrong_model(gateway: Gateway) -> None:
    unknown = await gateway.mint(model="nobody-serves-this")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model-not-served"
    assert unknown.json()["error"]["disposition"] == "rejected"
    decision = await gateway.control_get(
        f"/decisions/{unknown.json()['error']['mint_decision_id']}"
    )
    assert decision["outcome"] == "refused"

    minted = await gateway.minted()
    wrong = await gateway.chat(minted["key"], model="gpt-4o-mini")
    assert wrong.status_code == 403
    assert wrong.json()["error"]["code"] == "model-not-permitted"
    served_name = await gateway.chat(minted["key"], model="gpt-4o-2024-08-06")
    assert served_name.status_code == 200


async def test_endpoint_not_served_by_the_account(gateway: Gateway) -> None:
    minted = await gateway.minted()
    response = await gateway.client.post(
        f"{gateway.url}/v1/messages",
        json={"model": "gpt-4o", "max_tokens": 5, "messages": []},
        headers={"x-api-key": minted["key"]},
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "endpoint-not-served"


async def test_renewal_moves_the_lease_to_a_new_key(gateway: Gateway) -> None:
    minted = await gateway.minted()
    renewed = await gateway.client.post(
        f"{gateway.url}/control/v2/keys/{minted['key_id']}/renew", headers=gateway.control_headers
    )
    assert renewed.status_code == 201, renewed.text
    body = renewed.json()
    assert body["account_id"] == minted["account_id"]
    assert body["hop"] == 0
    assert (await gateway.chat(body["key"])).status_code == 200
    assert (await gateway.chat(minted["key"])).json()["error"]["code"] == "key-revoked"
    stale = await gateway.client.post(
        f"{gateway.url}/control/v2/keys/{minted['key_id']}/renew", headers=gateway.control_headers
    )
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "key-not-live"


async def test_accounts_view(gateway: Gateway) -> None:
    await gateway.minted()
    view = await gateway.control_get("/accounts")
    assert [a["id"] for a in view["accounts"]] == ["openai-main", "claude-main"]
    first = view["accounts"][0]
    assert first["configured"] is True
    assert first["health"] == "healthy"
    assert first["admin_state"] == "enabled"
    assert first["lease_capacity"] is None
    one = await gateway.control_get("/accounts/claude-main")
    assert one["id"] == "claude-main"
