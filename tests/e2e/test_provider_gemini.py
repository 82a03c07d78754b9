"""A `gemini` account through the whole gateway, against the demo upstream: Google's native
`generateContent` and `streamGenerateContent` with the model in the path and the key as
`x-goog-api-key`; the served name goes into the upstream path; the evidence row has the
`usageMetadata` counts; a scripted 429 cools the model, a 401 opens the account's circuit, an
error inside a stream is evidence, and a stalled stream ends with the gateway's error in
Google's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.scripted import ENV, IDLE_S, account_health, only_row, sse_events
from tests.fixtures.services import StoresEnv

BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
FLASH = "gemini-2.0-flash-001"
PRO = "gemini-2.5-pro"


@pytest.fixture
async def gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    async with MockUpstream() as upstream:
        gemini = account_entry(
            "gemini-main",
            upstream,
            {"flash": FLASH, "pro": PRO, "lite": "gemini-2.0-flash-lite"},
            provider="gemini",
        )
        env = gateway_env(
            tmp_path,
            [gemini],
            **stores_env,
            extra=ENV,
        )
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway


async def generate(gw: Gateway, key: str, model: str, *, stream: bool = False) -> tuple[int, bytes]:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    async with gw.client.stream(
        "POST",
        f"{gw.url}/v1beta/models/{model}:{method}",
        json=BODY,
        headers={"x-goog-api-key": key},
    ) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    return response.status_code, raw


async def test_gemini_answers_and_streams_with_the_model_in_the_path(gw: Gateway) -> None:
    minted = await gw.minted(model="flash", dispatch_id="d-gemini-1")
    status, raw = await generate(gw, minted["key"], "flash")
    assert status == 200, raw
    upstream = gw.upstreams[0].requests[-1]
    assert upstream.path == f"/v1beta/models/{FLASH}:generateContent"
    assert upstream.headers["x-goog-api-key"] == "sk-secret-gemini-main"
    assert upstream.json == BODY  # no model field is added to Google's body
    row = await only_row(gw, minted)
    assert (row["outcome"], row["requested_model"], row["served_model"]) == (
        "success",
        "flash",
        FLASH,
    )
    assert row["endpoint"] == "/v1beta/models/{model}:generateContent"
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_input_tokens"]) == (
        12,
        20,
        4,
    )

    streamed = await gw.minted(model="flash", dispatch_id="d-gemini-2")
    status, raw = await generate(gw, streamed["key"], FLASH, stream=True)  # the served name
    assert status == 200
    events = sse_events(raw)
    assert events[-1][1]["candidates"][0]["finishReason"] == "STOP"
    upstream = gw.upstreams[0].requests[-1]
    assert (upstream.path, upstream.query) == (
        f"/v1beta/models/{FLASH}:streamGenerateContent",
        "alt=sse",
    )
    row = await only_row(gw, streamed)
    assert (row["outcome"], row["stream"], row["input_tokens"], row["output_tokens"]) == (
        "success",
        True,
        12,
        20,
    )


async def test_gemini_keys_are_held_to_their_model_and_endpoints(gw: Gateway) -> None:
    minted = await gw.minted(model="flash", dispatch_id="d-gemini-3")
    status, raw = await generate(gw, minted["key"], "pro")
    assert status == 403
    assert b"model-not-permitted" in raw
    chat = await gw.chat(minted["key"], model="flash")
    assert chat.status_code == 404
    assert chat.json()["error"]["code"] == "endpoint-not-served"


async def test_gemini_failures_are_classified(gw: Gateway) -> None:
    def scripted(request: MockRequest) -> Reply | None:
        if f"/{FLASH}:" in request.path:
            return Reply(status=429, headers={"retry-after": "30"})
        if f"/{PRO}:" in request.path:
            return Reply(error_after=2)  # Google's error object inside the 200 stream
        return Reply(status=401)

    gw.upstreams[0].script = scripted
    limited = await gw.minted(model="flash", dispatch_id="d-gemini-429")
    status, raw = await generate(gw, limited["key"], "flash")
    assert status == 429
    assert b"RESOURCE_EXHAUSTED" in raw  # Google's own payload, relayed
    row = await only_row(gw, limited)
    assert (row["outcome"], row["scope"], row["qualifying"]) == ("upstream-error", "model", True)
    assert row["error_code"] == "resource_exhausted"
    account = await account_health(gw, "gemini-main")
    assert account["cooling_models"] == []  # a rate limit is no fault: nothing cools
    calls = gw.upstreams[0].count
    status, raw = await generate(gw, limited["key"], "flash")  # within the hold
    assert (status, gw.upstreams[0].count) == (429, calls)
    assert b"account-quota-exhausted" in raw

    broken = await gw.minted(model="pro", dispatch_id="d-gemini-stream")
    status, raw = await generate(gw, broken["key"], "pro", stream=True)
    assert status == 200
    assert sse_events(raw)[-1][1]["error"]["status"] == "UNAVAILABLE"
    row = await only_row(gw, broken)
    assert (row["outcome"], row["scope"], row["error_code"]) == (
        "in-stream-error",
        "model",
        "unavailable",
    )

    denied = await gw.minted(model="lite", dispatch_id="d-gemini-401")
    status, _ = await generate(gw, denied["key"], "lite")
    assert status == 401
    row = await only_row(gw, denied)
    assert (row["outcome"], row["scope"], row["error_code"]) == (
        "upstream-error",
        "account",
        "unauthenticated",
    )
    account = await account_health(gw, "gemini-main")
    assert account["circuit"]["open"] is True


async def test_a_stalled_gemini_stream_ends_with_the_gateways_error_in_googles_shape(
    gw: Gateway,
) -> None:
    gw.upstreams[0].script = lambda request: Reply(chunk_delays=[0, IDLE_S * 3])
    minted = await gw.minted(model="flash", dispatch_id="d-gemini-stall")
    status, raw = await generate(gw, minted["key"], "flash", stream=True)
    assert status == 200
    error: dict[str, Any] = sse_events(raw)[-1][1]["error"]
    assert (error["code"], error["status"]) == (504, "DEADLINE_EXCEEDED")
    assert error["details"][0]["reason"] == "upstream-timeout"
    row = await only_row(gw, minted)
    assert (row["outcome"], row["scope"]) == ("timeout", "model")
