"""Per-account upstream deadlines, and the official OpenAI SDK against the proxy's appended
error events: a cut or stalled stream makes it raise instead of returning half an answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest

from leasegate.demo.upstream import Reply
from tests.fixtures.gateways import Gateway
from tests.fixtures.scripted import (
    HEADERS_S,
    IDLE_S,
    PATIENT_HEADERS_S,
    account_health,
    call,
    only_row,
    openai_stream,
    script,
    scripted_gateway,
    without_usage,
)


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with scripted_gateway(tmp_path) as gateway:
        yield gateway


async def test_a_stream_may_idle_longer_than_the_headers_timeout(gw: Gateway) -> None:
    # patient-main: headers 0.4 s, idle 3 s. A 1.5 s pause mid-answer is not a headers timeout.
    gap = 1.5
    assert gap > 3 * PATIENT_HEADERS_S
    chunks = openai_stream()
    script(gw, Reply(chunks=chunks, chunk_delays=[0, 0, gap]))
    minted, response, raw = await call(gw, "gpt-patient")
    assert response.status_code == 200
    assert raw == without_usage(chunks)
    row = await only_row(gw, minted)
    assert (row["outcome"], row["output_tokens"]) == ("success", 4)


async def test_an_accounts_headers_timeout_overrides_the_default(gw: Gateway) -> None:
    # claude-main allows 2 s for headers; the default (0.5 s) would have refused this one.
    delay = 2 * HEADERS_S
    script(gw, Reply(headers_delay_s=delay))
    minted, response, _ = await call(gw, "claude-x", stream=False)
    assert response.status_code == 200
    assert (await only_row(gw, minted))["outcome"] == "success"

    script(gw, Reply(headers_delay_s=delay))
    minted, response, _ = await call(gw, "gpt-4o", stream=False)
    assert response.status_code == 504
    assert (await only_row(gw, minted))["outcome"] == "timeout"


async def test_a_stalled_buffered_body_is_a_504_timeout(gw: Gateway) -> None:
    # Headers at once, then the body stops: the idle deadline bounds non-streamed bodies too.
    script(gw, Reply(chunks=openai_stream(), chunk_delays=[0, 3 * IDLE_S]))
    minted, response, _ = await call(gw, stream=False)
    assert response.status_code == 504
    row = await only_row(gw, minted)
    assert (row["outcome"], row["scope"], row["qualifying"]) == ("timeout", "model", True)


def sdk(gateway: Gateway, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)


async def sdk_answer(gateway: Gateway, dispatch_id: str) -> str:
    minted = await gateway.minted(dispatch_id=dispatch_id)
    async with sdk(gateway, minted["key"]) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    return "".join(parts)


async def test_the_openai_sdk_reads_a_whole_stream(gw: Gateway) -> None:
    script(gw, Reply(chunks=openai_stream()))
    assert await sdk_answer(gw, "d-ok") == "w0 w1 w2 w3 "


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply(chunks=openai_stream(), cut_after=3), "upstream-truncated"),
        (Reply(chunks=openai_stream(), chunk_delays=[0, 0, 3 * IDLE_S]), "upstream-timeout"),
    ],
    ids=["cut", "stalled"],
)
async def test_the_openai_sdk_raises_on_an_unfinished_stream(
    gw: Gateway, reply: Reply, code: str
) -> None:
    script(gw, reply)
    with pytest.raises(openai.APIError) as raised:
        await sdk_answer(gw, "d-broken")
    assert raised.value.code == code
    health = await account_health(gw, "openai-main")
    assert health["health"] == "cooling"
