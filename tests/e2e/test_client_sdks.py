"""The official SDKs as the transport of a `Dispatch`: `openai.AsyncOpenAI` and
`anthropic.AsyncAnthropic` with their base URL at the proxy and the minted key as their API
key, non-streaming and streaming, through real HTTP; their own errors drive the hop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from leasegate.client import Dispatch
from leasegate.demo.upstream import Reply
from tests.fixtures.pool import TENANT, Pool, lease_watch, two_upstream_pool
from tests.fixtures.services import StoresEnv

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def mode() -> str:
    """Embedded only: what is under test is the SDKs against the proxy, not the stores."""
    return "embedded"


@pytest.fixture
async def pool(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Pool]:
    async with two_upstream_pool(tmp_path, stores_env) as running:
        yield running


def _dispatch(
    pool: Pool, model: str, dispatch_id: str, sdk_error: type[BaseException]
) -> Dispatch[Any]:
    return Dispatch(
        pool.control,
        pool.url,
        tenant=TENANT,
        dispatch_id=dispatch_id,
        model=model,
        deadline_s=20.0,
        failures=(sdk_error,),
    )


async def _openai_text(key: str, proxy_url: str, stream: bool) -> str:
    # max_retries=0: a retry inside the SDK would spend the same lease again; hops are ours
    async with openai.AsyncOpenAI(base_url=f"{proxy_url}/v1", api_key=key, max_retries=0) as sdk:
        if not stream:
            completion = await sdk.chat.completions.create(model="gpt-4o", messages=MESSAGES)
            return f"{completion.model}:{completion.choices[0].message.content}"
        parts: list[str] = []
        model = ""
        chunks = await sdk.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
        async for chunk in chunks:
            model = chunk.model
            parts.extend(c.delta.content or "" for c in chunk.choices)
        return f"{model}:{''.join(parts)}"


async def _anthropic_text(key: str, proxy_url: str, stream: bool) -> str:
    async with anthropic.AsyncAnthropic(base_url=proxy_url, api_key=key, max_retries=0) as sdk:
        if not stream:
            message = await sdk.messages.create(model="claude-x", max_tokens=64, messages=MESSAGES)
            text = "".join(b.text for b in message.content if b.type == "text")
            return f"{message.model}:{text}"
        async with sdk.messages.stream(
            model="claude-x", max_tokens=64, messages=MESSAGES
        ) as events:
            final = await events.get_final_message()
        return f"{final.model}:{''.join(b.text for b in final.content if b.type == 'text')}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_openai_sdk_through_the_proxy(pool: Pool, stream: bool) -> None:
    async def call(key: str, proxy_url: str) -> str:
        return await _openai_text(key, proxy_url, stream)

    result = await _dispatch(pool, "gpt-4o", "d-1", openai.APIError).run(call)
    model, _, text = result.answer.partition(":")
    assert (model, result.decision.account_id) == ("gpt-4o-a", "primary")
    assert text.startswith("The quick")
    seen = pool.primary.requests[-1]
    assert seen.headers["authorization"] == "Bearer sk-secret-primary"  # not the virtual key


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_anthropic_sdk_through_the_proxy(pool: Pool, stream: bool) -> None:
    async def call(key: str, proxy_url: str) -> str:
        return await _anthropic_text(key, proxy_url, stream)

    result = await _dispatch(pool, "claude-x", "d-1", anthropic.APIError).run(call)
    model, _, text = result.answer.partition(":")
    assert (model, result.decision.account_id) == ("claude-x-a", "claude-a")
    assert text.startswith("The quick")
    seen = pool.primary.requests[-1]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-secret-claude-a"


@pytest.mark.parametrize(
    ("sdk", "reply", "stream"),
    [
        ("openai", Reply(status=429), False),
        ("openai", Reply(error_after=2), True),
        ("anthropic", Reply(status=529), False),
        ("anthropic", Reply(error_after=2), True),
    ],
    ids=["openai-429", "openai-in-stream", "anthropic-529", "anthropic-in-stream"],
)
async def test_sdk_errors_drive_a_hop_to_the_second_account(
    pool: Pool, sdk: str, reply: Reply, stream: bool
) -> None:
    pool.primary_script.reply = reply
    error: type[BaseException]
    if sdk == "openai":
        model, error, backup = "gpt-4o", openai.APIError, "backup"

        async def call(key: str, proxy_url: str) -> str:
            return await _openai_text(key, proxy_url, stream)
    else:
        model, error, backup = "claude-x", anthropic.APIError, "claude-b"

        async def call(key: str, proxy_url: str) -> str:
            return await _anthropic_text(key, proxy_url, stream)

    async with lease_watch(pool) as leases:
        result = await _dispatch(pool, model, "d-1", error).run(call)
    assert max(leases) <= 1
    assert [link.account_id for link in result.chain][-1] == backup
    assert [link.hop for link in result.chain] == [0, 1]
    assert result.chain[0].ended is not None
