"""An `azure-openai` account through the whole gateway, against the demo upstream: mint, call
(the OpenAI SDK's own paths, answered and streamed), the upstream sees Azure's deployment
path, `api-version` and `api-key`; the evidence row has the token counts; a scripted 429 cools
the deployment, a 401 opens the account's circuit, an error inside a stream is evidence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.scripted import ENV, account_health, only_row
from tests.fixtures.services import StoresEnv

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    async with MockUpstream() as upstream:
        azure = account_entry(
            "azure-east",
            upstream,
            {"gpt-4o": "gpt4o-prod", "gpt-4o-mini": "mini-prod", "gpt-4.1": "gpt41-prod"},
            provider="azure-openai",
            api_version="2025-01-01-preview",
        )
        env = gateway_env(
            tmp_path,
            [azure],
            **stores_env,
            extra=ENV,
        )
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway


def sdk(gw: Gateway, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)


async def test_an_azure_deployment_answers_and_streams_with_evidence(gw: Gateway) -> None:
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-azure-1")
    async with sdk(gw, minted["key"]) as client:
        answer = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert answer.model == "gpt4o-prod"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == 12
    upstream = gw.upstreams[0].requests[-1]
    assert upstream.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert upstream.query == "api-version=2025-01-01-preview"
    assert upstream.headers["api-key"] == "sk-secret-azure-east"
    assert "authorization" not in upstream.headers  # the caller's key never goes upstream
    row = await only_row(gw, minted)
    assert (row["outcome"], row["served_model"], row["endpoint"]) == (
        "success",
        "gpt4o-prod",
        "/v1/chat/completions",
    )
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_input_tokens"]) == (
        12,
        20,
        4,
    )

    streamed = await gw.minted(model="gpt-4o", dispatch_id="d-azure-2")
    async with sdk(gw, streamed["key"]) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=MESSAGES, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.startswith("The quick brown fox")
    row = await only_row(gw, streamed)
    assert (row["outcome"], row["stream"], row["input_tokens"], row["output_tokens"]) == (
        "success",
        True,
        12,
        20,
    )


async def test_azure_failures_are_classified(gw: Gateway) -> None:
    def scripted(request: MockRequest) -> Reply | None:
        if "/gpt4o-prod/" in request.path:
            return Reply(status=429, headers={"retry-after": "30"})
        if "/gpt41-prod/" in request.path:
            return Reply(error_after=2)  # an error chunk inside the 200 stream
        return Reply(status=401)

    gw.upstreams[0].script = scripted
    limited = await gw.minted(model="gpt-4o", dispatch_id="d-azure-429")
    async with sdk(gw, limited["key"]) as client:
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    row = await only_row(gw, limited)
    assert (row["outcome"], row["scope"], row["qualifying"]) == ("upstream-error", "model", True)
    account = await account_health(gw, "azure-east")
    assert [c["model"] for c in account["cooling_models"]] == ["gpt4o-prod"]
    assert account["circuit"]["open"] is False

    broken = await gw.minted(model="gpt-4.1", dispatch_id="d-azure-stream")
    async with sdk(gw, broken["key"]) as client:
        stream = await client.chat.completions.create(
            model="gpt-4.1", messages=MESSAGES, stream=True
        )
        with pytest.raises(openai.APIError):
            async for _ in stream:
                pass
    row = await only_row(gw, broken)
    assert (row["outcome"], row["scope"], row["error_code"]) == (
        "in-stream-error",
        "model",
        "http-502",
    )

    denied = await gw.minted(model="gpt-4o-mini", dispatch_id="d-azure-401")
    async with sdk(gw, denied["key"]) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    row = await only_row(gw, denied)
    assert (row["outcome"], row["scope"], row["qualifying"]) == ("upstream-error", "account", True)
    account = await account_health(gw, "azure-east")
    assert account["circuit"]["open"] is True
