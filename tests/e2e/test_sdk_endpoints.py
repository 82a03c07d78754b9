"""The two SDK calls beyond completions: the openai SDK's `models.retrieve` and the anthropic
SDK's `messages.count_tokens`, through the proxy with a minted key."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from leasegate.demo.upstream import MockRequest, Reply
from tests.fixtures.gateways import Gateway

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


async def test_openai_models_retrieve(gateway: Gateway) -> None:
    minted = await gateway.minted(model="gpt-4o")
    async with openai.AsyncOpenAI(
        base_url=f"{gateway.url}/v1", api_key=minted["key"], max_retries=0
    ) as sdk:
        for name in ("gpt-4o", "gpt-4o-2024-08-06"):  # requested and served names
            model = await sdk.models.retrieve(name)
            assert model.id == name
            assert model.owned_by == "openai"
        with pytest.raises(openai.NotFoundError):
            await sdk.models.retrieve("gpt-4o-mini")  # served by the account, not this key
    async with openai.AsyncOpenAI(
        base_url=f"{gateway.url}/v1", api_key="lg_not-a-key", max_retries=0
    ) as sdk:
        with pytest.raises(openai.AuthenticationError):
            await sdk.models.retrieve("gpt-4o")


async def test_anthropic_count_tokens_is_forwarded_and_recorded(gateway: Gateway) -> None:
    minted = await gateway.minted(model="claude-x")
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=minted["key"], max_retries=0
    ) as sdk:
        counted = await sdk.messages.count_tokens(model="claude-x", messages=MESSAGES)
    assert counted.input_tokens == 12  # the mock upstream's answer, relayed
    (row,) = await gateway.evidence_for(minted["mint_decision_id"])
    assert row["endpoint"] == "/v1/messages/count_tokens"
    assert row["outcome"] == "success"
    assert row["served_model"] == "claude-x-2026"
    upstream = gateway.upstreams[0].requests[-1]
    assert upstream.path == "/v1/messages/count_tokens"
    assert upstream.json is not None
    assert upstream.json["model"] == "claude-x-2026"


async def test_count_tokens_failures_do_not_cool_the_model(gateway: Gateway) -> None:
    """Token counting is not a completion: its failures are recorded but never fed to the
    health store, so completions on the same pair go on being served."""

    def script(request: MockRequest) -> Reply:
        return Reply(status=500) if request.path.endswith("/count_tokens") else Reply()

    gateway.upstreams[0].script = script
    minted = await gateway.minted(model="claude-x")
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=minted["key"], max_retries=0
    ) as sdk:
        for _ in range(5):  # beyond the failure threshold (3)
            with pytest.raises(anthropic.InternalServerError):
                await sdk.messages.count_tokens(model="claude-x", messages=MESSAGES)
        message = await sdk.messages.create(model="claude-x", max_tokens=16, messages=MESSAGES)
    assert message.model == "claude-x-2026"
    rows = await gateway.evidence_for(minted["mint_decision_id"], count=6)
    counted = [r for r in rows if r["endpoint"] == "/v1/messages/count_tokens"]
    assert len(counted) == 5
    assert all(r["outcome"] != "success" for r in counted)
    accounts = await gateway.control_get("/accounts")
    (claude,) = [a for a in accounts["accounts"] if a["id"] == "claude-main"]
    assert claude["health"] == "healthy"
