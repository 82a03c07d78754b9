"""The fleet benchmark's mock upstream answers as the providers do (bench/fleet/mock.py): a
429 with each provider's body and headers when the bucket lacks room (none at all for the
headerless account), rate-limit headers and usage on an answer, and a prompt-cache hit when a
session's next turn lands on the same account. The gateway's quota learning is measured
against exactly these answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp.test_utils import TestServer

from bench.fleet.mock import Mock, MockAccount, app

LIMITS = {"requests": 1000, "tokens": 1_000_000}
HUGE = 50_000
"""Output tokens that take the buckets (empty at start) about 0.5 s (OpenAI-style) and 5 s
(Anthropic's output bucket) to refill."""


@pytest.fixture
async def mock_url() -> AsyncIterator[str]:
    accounts = [
        MockAccount("oa", "openai", "gpt-x", dict(LIMITS)),
        MockAccount(
            "an",
            "anthropic",
            "claude-x",
            {"requests": 1000, "input-tokens": 1_000_000, "output-tokens": 100_000},
        ),
        MockAccount("plain", "none", "plain-x", dict(LIMITS)),
    ]
    server = TestServer(app(Mock(accounts)), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def _body(session: str, turn_chars: int = 400, max_tokens: int = 10) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": f"session {session}\n".ljust(turn_chars, "x")}],
    }


async def test_an_empty_bucket_answers_each_providers_rate_limit(mock_url: str) -> None:
    async with httpx.AsyncClient(base_url=mock_url) as http:
        await http.post("/fleet/reset")
        openai = await http.post(
            "/v1/chat/completions",
            json=_body("a", max_tokens=HUGE),
            headers={"authorization": "Bearer sk-fleet-oa"},
        )
        claude = await http.post(
            "/v1/messages", json=_body("b", max_tokens=HUGE), headers={"x-api-key": "sk-fleet-an"}
        )
        plain = await http.post(
            "/v1/chat/completions",
            json=_body("c", max_tokens=HUGE),
            headers={"authorization": "Bearer sk-fleet-plain"},
        )
    assert openai.status_code == 429
    assert openai.json()["error"]["code"] == "rate_limit_exceeded"
    assert openai.headers["retry-after"] == "1"  # 0.5 s, in whole seconds rounded up
    assert int(openai.headers["x-ratelimit-remaining-tokens"]) < HUGE
    assert openai.headers["x-ratelimit-reset-tokens"].endswith("s")
    assert claude.status_code == 429
    assert claude.json()["error"]["type"] == "rate_limit_error"
    assert claude.headers["retry-after"] in ("5", "6")
    assert claude.headers["anthropic-ratelimit-input-tokens-reset"].endswith("Z")
    assert plain.status_code == 429
    assert not [h for h in plain.headers if "ratelimit" in h or h == "retry-after"]


async def test_answers_carry_headers_usage_and_count_cache_hits(mock_url: str) -> None:
    async with httpx.AsyncClient(base_url=mock_url) as http:
        await http.post("/fleet/reset")
        await asyncio.sleep(0.2)  # 20 requests' and 20 000 tokens' worth of refill
        oa = {"authorization": "Bearer sk-fleet-oa"}
        first = await http.post("/v1/chat/completions", json=_body("s"), headers=oa)
        second = await http.post("/v1/chat/completions", json=_body("s"), headers=oa)
        elsewhere = await http.post(
            "/v1/messages", json=_body("s"), headers={"x-api-key": "sk-fleet-an"}
        )
        stats = (await http.get("/fleet/stats")).json()
    assert first.status_code == second.status_code == elsewhere.status_code == 200
    assert first.json()["usage"]["prompt_tokens"] == 100  # 400 characters
    assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 100
    assert elsewhere.json()["usage"]["cache_read_input_tokens"] == 0  # another account
    remaining = int(first.headers["x-ratelimit-remaining-tokens"])
    assert 0 < remaining < LIMITS["tokens"]
    assert (stats["oa"]["cache_lookups"], stats["oa"]["cache_hits"]) == (1, 1)
    assert (stats["an"]["cache_lookups"], stats["an"]["cache_hits"]) == (1, 0)
    assert stats["oa"]["tokens"] == 2 * (100 + 10)


async def test_anthropics_input_limit_is_not_charged_for_cache_reads() -> None:
    """As on Anthropic's current models: a session's next turn on the same account draws
    only its uncached input from the input-token bucket. The bucket here holds ~200 input
    tokens a second after the reset: the second turn's 150-token prompt fits only because
    the first turn's 100 are a cache read."""
    account = MockAccount(
        "an",
        "anthropic",
        "claude-x",
        {"requests": 1000, "input-tokens": 2000, "output-tokens": 10**6},
    )
    server = TestServer(app(Mock([account])), host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url("")).rstrip("/")
        async with httpx.AsyncClient(base_url=url) as http:
            await http.post("/fleet/reset")
            await asyncio.sleep(1.0)
            an = {"x-api-key": "sk-fleet-an"}
            first = await http.post("/v1/messages", json=_body("s", 400), headers=an)
            second = await http.post("/v1/messages", json=_body("s", 600), headers=an)
            other = await http.post("/v1/messages", json=_body("t", 600), headers=an)
    finally:
        await server.close()
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["usage"]["cache_read_input_tokens"] == 100
    assert second.json()["usage"]["input_tokens"] == 50
    assert other.status_code == 429  # another session's 150 uncached tokens do not fit
