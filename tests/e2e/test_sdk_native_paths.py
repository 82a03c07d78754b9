"""Workers connect with a provider's own SDK as its docs say, pointed at the proxy:
`openai.AzureOpenAI(azure_endpoint=<proxy>, api_key=<key>, api_version=...)` reaches an azure-
openai account through the deployment paths (the deployment names the model, the `api-key`
header carries the virtual key), and `google-genai` with its defaults (API version v1) or
v1beta reaches a gemini account (its sync client, in a thread: its async one subclasses
aiohttp's session, which warns); the same SDK under another API version gets a 404 naming the
path to use, never a 405."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.scripted import ENV, only_row
from tests.fixtures.services import StoresEnv

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    async with MockUpstream() as upstream:
        azure = account_entry(
            "azure-east",
            upstream,
            {"gpt-4o": "gpt4o-prod", "text-embedding-3-small": "embed-prod"},
            provider="azure-openai",
            api_version="2025-01-01-preview",
        )
        gemini = account_entry(
            "gemini-main", upstream, {"flash": "gemini-2.0-flash-001"}, provider="gemini"
        )
        env = gateway_env(tmp_path, [azure, gemini], **stores_env, extra=ENV)
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway


def azure(gw: Gateway, key: str) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=gw.url, api_key=key, api_version="2024-10-21", max_retries=0
    )


async def test_azure_openai_sdk_calls_the_deployment_paths_with_its_api_key(gw: Gateway) -> None:
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-azure-sdk-1")
    async with azure(gw, minted["key"]) as client:
        answer = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=MESSAGES, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == 12
    assert text.startswith("The quick brown fox")
    upstream = gw.upstreams[0].requests[-1]
    # the account's deployment and api-version go upstream, with the account's credential
    assert upstream.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert upstream.query == "api-version=2025-01-01-preview"
    assert upstream.headers["api-key"] == "sk-secret-azure-east"
    rows = await gw.evidence_for(minted["mint_decision_id"], 2)
    assert sorted((r["outcome"], r["stream"], r["endpoint"]) for r in rows) == [
        ("success", False, "/v1/chat/completions"),
        ("success", True, "/v1/chat/completions"),
    ]

    embed = await gw.minted(model="text-embedding-3-small", dispatch_id="d-azure-sdk-2")
    async with azure(gw, embed["key"]) as client:
        vectors = await client.embeddings.create(model="text-embedding-3-small", input="hi")
    assert vectors.data
    assert gw.upstreams[0].requests[-1].path == "/openai/deployments/embed-prod/embeddings"
    row = await only_row(gw, embed)
    assert (row["outcome"], row["endpoint"]) == ("success", "/v1/embeddings")


async def test_azure_deployment_is_the_model_the_key_is_checked_against(gw: Gateway) -> None:
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-azure-sdk-3")
    async with azure(gw, minted["key"]) as client:
        with pytest.raises(openai.PermissionDeniedError) as refused:
            # the body is the SDK's; the deployment segment is what the key is checked for
            await client.chat.completions.create(model="text-embedding-3-small", messages=MESSAGES)
    assert refused.value.status_code == 403
    assert "model-not-permitted" in str(refused.value.body)
    async with openai.AsyncAzureOpenAI(
        azure_endpoint=gw.url, api_key="lg-not-a-key", api_version="2024-10-21", max_retries=0
    ) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)


def gemini(gw: Gateway, key: str, api_version: str | None = None) -> genai.Client:
    options = types.HttpOptions(base_url=gw.url, api_version=api_version)
    return genai.Client(api_key=key, http_options=options)


@pytest.mark.parametrize("version", [None, "v1beta"])
async def test_google_genai_with_its_defaults_answers_and_streams(
    gw: Gateway, version: str | None
) -> None:
    minted = await gw.minted(model="flash", dispatch_id=f"d-genai-{version}")
    client = gemini(gw, minted["key"], version)
    answer = await asyncio.to_thread(client.models.generate_content, model="flash", contents="hi")
    assert answer.text
    assert answer.text.startswith("The quick brown fox")
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.prompt_token_count

    def streamed() -> str:
        chunks = client.models.generate_content_stream(model="flash", contents="hi")
        return "".join(chunk.text or "" for chunk in chunks)

    assert (await asyncio.to_thread(streamed)).startswith("The quick")
    upstream = gw.upstreams[0].requests[-1]
    assert upstream.path == "/v1beta/models/gemini-2.0-flash-001:streamGenerateContent"
    rows = await gw.evidence_for(minted["mint_decision_id"], 2)
    assert sorted(r["outcome"] for r in rows) == ["success", "success"]


async def test_google_genai_under_another_api_version_gets_a_404_naming_v1beta(gw: Gateway) -> None:
    minted = await gw.minted(model="flash", dispatch_id="d-genai-2")
    client = gemini(gw, minted["key"], api_version="v1alpha")
    with pytest.raises(genai_errors.ClientError) as refused:
        await asyncio.to_thread(client.models.generate_content, model="flash", contents="hi")
    assert refused.value.code == 404
    assert "/v1beta/models/flash:generateContent" in str(refused.value)
    response = await gw.client.post(
        f"{gw.url}/v1/models/flash:embedContent", json={}, headers={"x-goog-api-key": "k"}
    )
    assert response.status_code == 404  # never the 405 of GET /v1/models/{id}
    assert "embedContent is not served" in response.json()["error"]["message"]
