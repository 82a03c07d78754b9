"""`vertex` (Claude) and `vertex-gemini` accounts through the whole gateway, against a mock
Vertex AI and a mock Google token endpoint that verifies the service account's signed JWT:
the official `anthropic` SDK pointed at the proxy gets Claude's answer and stream; Gemini's
native API works as for a `gemini` account; the upstream sees the project/location path,
Vertex's `anthropic_version`, an ADC access token and no caller header of another provider;
Google's errors are classified (and reach the SDK in Anthropic's shape); tokens that expire
during a run are refreshed, once for many concurrent requests, without a failed request."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fixtures.gateways import Gateway, gateway_env, in_process_gateway
from tests.fixtures.mock_clouds import CLOUD_ENV, MockVertex, mock_vertex
from tests.fixtures.scripted import account_health, only_row
from tests.fixtures.services import StoresEnv

CLAUDE = "claude-sonnet-4-5@20250929"
GEMINI = "gemini-2.5-pro"
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
PRICES = {"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75"}
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def entries(mock: MockVertex) -> list[dict[str, Any]]:
    common = {"base_url": mock.url, "project": "fleet-prod-1", "location": "global"}
    return [
        {
            "id": "vertex-claude",
            "provider": "vertex",
            "models": {"claude-fleet": {"served": CLAUDE, "prices": PRICES}},
            **common,
        },
        {
            "id": "vertex-gemini",
            "provider": "vertex-gemini",
            "models": {"gemini-fleet": {"served": GEMINI, "prices": PRICES}},
            **common,
        },
    ]


@asynccontextmanager
async def vertex_gateway(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch, token_s: float
) -> AsyncIterator[tuple[Gateway, MockVertex]]:
    for name in list(os.environ):
        if name.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # never the real metadata server
    async with mock_vertex(token_s) as mock:
        path = mock.service_account_file(tmp_path / "service-account.json")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
        env = gateway_env(tmp_path, entries(mock), **stores_env, extra=CLOUD_ENV, currency="USD")
        async with in_process_gateway(env) as gateway:
            yield gateway, mock


def sdk(gw: Gateway, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.url, api_key=key, max_retries=0)


async def test_claude_and_gemini_on_vertex_through_the_proxy(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with vertex_gateway(tmp_path, stores_env, monkeypatch, 3600.0) as (gateway, mock):
        minted = await gateway.minted(model="claude-fleet", dispatch_id="d-vertex-1")
        async with sdk(gateway, minted["key"]) as client:
            message = await client.messages.create(
                model="claude-fleet",
                max_tokens=64,
                messages=MESSAGES,
                extra_headers={"anthropic-beta": "b-1"},
            )
            assert message.model == CLAUDE
            async with client.messages.stream(
                model="claude-fleet", max_tokens=64, messages=MESSAGES
            ) as stream:
                text = "".join([piece async for piece in stream.text_stream])
        assert text.startswith("The quick brown")
        plain, streamed = mock.seen
        prefix = "/v1/projects/fleet-prod-1/locations/global/publishers/anthropic/models/"
        assert plain.path == prefix + CLAUDE + ":rawPredict"
        assert streamed.path == prefix + CLAUDE + ":streamRawPredict"
        assert plain.body == {
            "max_tokens": 64,
            "messages": MESSAGES,
            "anthropic_version": "vertex-2023-10-16",
            "anthropic_beta": ["b-1"],
        }
        assert streamed.body["stream"] is True
        lowered = {name.lower() for name in plain.headers}
        assert not lowered & {"anthropic-version", "anthropic-beta", "x-api-key"}
        assert plain.headers["Authorization"].startswith("Bearer ya29.")
        rows = await gateway.evidence_for(minted["mint_decision_id"], count=2)
        assert [(r["outcome"], r["input_tokens"], r["cache_read_input_tokens"]) for r in rows] == [
            ("success", 12, 4),
            ("success", 12, 4),
        ]
        # Claude's counts: the 4 cached tokens beside the 12 input ones, each at its price
        claude_cost = (12 * 3 + 3 * 15 + 4 * Decimal("0.3")) / 10**6
        assert [Decimal(r["cost"]) for r in rows] == [claude_cost, claude_cost]

        gem = await gateway.minted(model="gemini-fleet", dispatch_id="d-vertex-2")
        for method in ("generateContent", "streamGenerateContent?alt=sse"):
            response = await gateway.client.post(
                f"{gateway.url}/v1beta/models/gemini-fleet:{method}",
                json=GEMINI_BODY,
                headers={"x-goog-api-key": gem["key"]},
            )
            assert response.status_code == 200, response.text
        google = "/v1/projects/fleet-prod-1/locations/global/publishers/google/models/"
        assert [seen.path for seen in mock.seen[2:]] == [
            google + GEMINI + ":generateContent",
            google + GEMINI + ":streamGenerateContent?alt=sse",
        ]
        assert "x-goog-api-key" not in {name.lower() for name in mock.seen[2].headers}
        # the streamed answer's row is written once its stream has ended
        gem_rows = await gateway.evidence_for(gem["mint_decision_id"], count=2)
        # Gemini's counts: the 4 cached tokens inside the 12 input ones (8 at the input price)
        gemini_cost = (8 * 3 + 4 * Decimal("0.3") + 3 * 15) / 10**6
        assert [Decimal(r["cost"]) for r in gem_rows] == [gemini_cost, gemini_cost]
        assert mock.assertions == 2  # one token per account served all five requests
        assert mock.rejected == 0

        limited = await gateway.minted(model="claude-fleet", dispatch_id="d-vertex-3")
        mock.failures.append((429, "RESOURCE_EXHAUSTED"))
        async with sdk(gateway, limited["key"]) as client:
            with pytest.raises(anthropic.RateLimitError):
                await client.messages.create(model="claude-fleet", max_tokens=8, messages=MESSAGES)
        row = await only_row(gateway, limited)
        assert (row["outcome"], row["scope"], row["error_code"].lower()) == (
            "upstream-error",
            "model",
            "resource_exhausted",
        )

        denied = await gateway.minted(model="gemini-fleet", dispatch_id="d-vertex-4")
        mock.failures.append((403, "PERMISSION_DENIED"))
        response = await gateway.client.post(
            f"{gateway.url}/v1beta/models/gemini-fleet:generateContent",
            json=GEMINI_BODY,
            headers={"x-goog-api-key": denied["key"]},
        )
        assert response.status_code == 403
        assert response.json()["error"]["status"] == "PERMISSION_DENIED"  # Google's, relayed
        row = await only_row(gateway, denied)
        assert (row["scope"], row["qualifying"]) == ("account", True)
        assert (await account_health(gateway, "vertex-gemini"))["circuit"]["open"] is True


async def test_tokens_that_expire_during_a_run_are_refreshed_once_without_a_failed_request(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens valid 225 s + 3 s: google-auth's refresh window (225 s) makes each due 3 s after
    issue (1.5 s was shorter than a request's way to the mock on a loaded machine). Twenty
    concurrent requests share one token (one assertion); the run goes on across several
    expiries; no request fails and the mock never sees an expired token."""
    async with vertex_gateway(tmp_path, stores_env, monkeypatch, 228.0) as (gateway, mock):
        key = (await gateway.minted(model="claude-fleet", dispatch_id="d-vertex-5"))["key"]
        async with sdk(gateway, key) as client:

            async def one() -> None:
                message = await client.messages.create(
                    model="claude-fleet", max_tokens=8, messages=MESSAGES
                )
                assert message.content[0].type == "text"

            await asyncio.gather(*(one() for _ in range(20)))
            assert mock.assertions == 1
            for _ in range(10):
                await asyncio.sleep(0.6)
                await asyncio.gather(*(one() for _ in range(3)))
    assert mock.rejected == 0
    assert len(mock.seen) == 50
    assert 2 <= mock.assertions <= 4
