"""Quota through the whole gateway (issue 21 items 1-3, issue 22 item 7), against the demo
upstream answering rate-limit headers and 429s, embedded and on Postgres + Redis.

What a worker notices: once the provider's headers say the account has no room, the proxy
refuses at once with 429 `account-quota-exhausted` and a `Retry-After`, without asking the
provider; a rate-limit 429 holds the pair exactly until the provider's wait, never the 30 s
base cooldown, and cools nothing; a WAF's HTML 403 never opens the account's circuit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.scripted import ENV, account_health
from tests.fixtures.services import StoresEnv

SERVED = "gpt-4o-2024-08-06"


@pytest.fixture
async def gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    async with MockUpstream() as upstream:
        local = account_entry(
            "local-main", upstream, {"local": "local-8b"}, provider="openai-compatible"
        )
        local["models"] = {"local": {"served": "local-8b", "rpm": 2, "tpm": 100_000}}
        accounts = [
            account_entry("openai-main", upstream, {"gpt-4o": SERVED, "gpt-mini": "gpt-mini"}),
            local,
        ]
        env = gateway_env(tmp_path, accounts, **stores_env, extra=ENV)
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway


def limits(requests: tuple[int, int, str], tokens: tuple[int, int, str]) -> dict[str, str]:
    """OpenAI's headers: (limit, remaining, reset) per dimension."""
    headers = {}
    for name, (limit, remaining, reset) in (("requests", requests), ("tokens", tokens)):
        headers[f"x-ratelimit-limit-{name}"] = str(limit)
        headers[f"x-ratelimit-remaining-{name}"] = str(remaining)
        headers[f"x-ratelimit-reset-{name}"] = reset
    return headers


async def rows_of(gw: Gateway, minted: dict[str, Any], count: int) -> list[dict[str, Any]]:
    rows = await gw.evidence_for(minted["mint_decision_id"], count)
    return sorted(rows, key=lambda r: r["started_at"])


async def test_the_proxy_refuses_what_the_providers_headers_say_it_cannot_take(
    gw: Gateway,
) -> None:
    upstream = gw.upstreams[0]
    # the last request of three a minute: the next one is free in 20 s
    upstream.script = lambda r: Reply(headers=limits((3, 0, "60s"), (90_000, 89_000, "1s")))
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-q-1")
    assert (await gw.chat(minted)).status_code == 200
    calls = upstream.count
    refused = await gw.chat(minted)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "account-quota-exhausted"
    assert 19 <= int(refused.headers["retry-after"]) <= 21
    assert upstream.count == calls, "the provider is not asked what it said it will refuse"
    answered, gateway_row = await rows_of(gw, minted, 2)
    assert answered["outcome"] == "success"
    assert (gateway_row["outcome"], gateway_row["refusal_reason"]) == (
        "refused",
        "account-quota-exhausted",
    )
    assert (gateway_row["qualifying"], gateway_row["scope"]) == (False, None)
    view = await account_health(gw, "openai-main")
    assert (view["health"], view["cooling_models"]) == ("healthy", [])

    # another model of the same account has its own quota
    other = await gw.minted(model="gpt-mini", dispatch_id="d-q-2")
    assert (await gw.chat(other)).status_code == 200


async def test_a_request_larger_than_the_tokens_left_is_refused_a_smaller_one_goes(
    gw: Gateway,
) -> None:
    upstream = gw.upstreams[0]
    upstream.script = lambda r: Reply(headers=limits((500, 400, "1s"), (10_000, 600, "50s")))
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-q-3")
    assert (await gw.chat(minted)).status_code == 200
    calls = upstream.count
    big = await gw.chat(minted, max_tokens=2_000)
    assert big.status_code == 429
    assert big.json()["error"]["code"] == "account-quota-exhausted"
    assert upstream.count == calls
    small = await gw.chat(minted, max_tokens=50)
    assert small.status_code == 200
    assert upstream.count == calls + 1


async def test_a_rate_limit_429_holds_the_pair_until_its_retry_after_and_cools_nothing(
    gw: Gateway,
) -> None:
    upstream = gw.upstreams[0]
    limited = Reply.json_error(
        429,
        {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "slow down"}},
        {"retry-after-ms": "600"},
    )
    replies = [limited]
    upstream.script = lambda r: replies.pop() if replies else None
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-q-4")
    first = await gw.chat(minted)
    assert first.status_code == 429
    assert 600 <= int(first.headers["retry-after-ms"]) <= 660  # the hold: the wait + jitter
    held = await gw.chat(minted)
    assert held.json()["error"]["code"] == "account-quota-exhausted"
    assert upstream.count == 1
    view = await account_health(gw, "openai-main")
    assert (view["health"], view["cooling_models"], view["circuit"]["open"]) == (
        "healthy",
        [],
        False,
    )  # with a threshold of 1 this 429 used to cool the pair for the 30 s base
    await asyncio.sleep(0.7)
    assert (await gw.chat(minted)).status_code == 200
    rows = await rows_of(gw, minted, 3)
    assert [r["error_code"] for r in rows] == [
        "rate_limit_exceeded",
        "account-quota-exhausted",
        None,
    ]
    assert rows[0]["qualifying"] is True  # the provider's own refusal may still license a hop


async def test_malformed_headers_change_nothing(gw: Gateway) -> None:
    upstream = gw.upstreams[0]
    garbage = {
        "x-ratelimit-limit-requests": "many",
        "x-ratelimit-remaining-requests": "-1",
        "x-ratelimit-reset-requests": "tomorrow",
        "x-ratelimit-remaining-tokens": "0x10",
    }
    upstream.script = lambda r: Reply(headers=garbage)
    minted = await gw.minted(model="gpt-4o", dispatch_id="d-q-5")
    for _ in range(3):
        assert (await gw.chat(minted)).status_code == 200
    assert upstream.count == 3


async def test_declared_limits_hold_an_account_without_headers(gw: Gateway) -> None:
    upstream = gw.upstreams[0]
    minted = await gw.minted(model="local", dispatch_id="d-q-6")
    assert [(await gw.chat(minted)).status_code for _ in range(2)] == [200, 200]
    refused = await gw.chat(minted)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "account-quota-exhausted"
    assert 1 <= int(refused.headers["retry-after"]) <= 30  # rpm 2: one every 30 s
    assert upstream.count == 2


async def test_a_waf_page_403_never_opens_the_accounts_circuit(gw: Gateway) -> None:
    upstream = gw.upstreams[0]

    def script(request: MockRequest) -> Reply | None:
        if b"gpt-mini" in request.body:
            page = b"<html><body>Request blocked by edge security</body></html>"
            return Reply(status=403, headers={"content-type": "text/html"}, body=page)
        return None

    upstream.script = script
    blocked = await gw.minted(model="gpt-mini", dispatch_id="d-q-7")
    assert (await gw.chat(blocked)).status_code == 403
    other = await gw.minted(model="gpt-4o", dispatch_id="d-q-8")
    assert (await gw.chat(other)).status_code == 200, "every other model is still served"
    view = await account_health(gw, "openai-main")
    assert view["circuit"]["open"] is False
    (row,) = await gw.evidence_for(blocked["mint_decision_id"])
    assert (row["scope"], row["error_code"]) == ("model", "http-403")
