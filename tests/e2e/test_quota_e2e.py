"""Quota through the whole gateway (issue 21 items 1-3, issue 22 item 7), against the demo
upstream answering rate-limit headers and 429s, embedded and on Postgres + Redis.

What a worker notices: once the provider's headers say the account has no room, the proxy
refuses at once with 429 `account-quota-exhausted` and a `Retry-After`, without asking the
provider; a rate-limit 429 holds the pair exactly until the provider's wait, never the 30 s
base cooldown, and cools nothing; a WAF's HTML 403 never opens the account's circuit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.scripted import ENV, account_health
from tests.fixtures.services import StoresEnv

SERVED = "gpt-4o-2024-08-06"


# Answers may take 5 s to start: no test here is about a deadline, and the scripted suite's
# 0.5 s turned a slow first answer on a loaded machine into a 504
PATIENT = {**ENV, "LEASEGATE_UPSTREAM_HEADERS_TIMEOUT_S": "5"}


@pytest.fixture
async def gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    async with _gateway(tmp_path, stores_env, PATIENT) as gateway:
        yield gateway


@pytest.fixture
async def probing_gw(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Gateway]:
    """A proxy that probes a pair nothing is known of (off by default)."""
    async with _gateway(
        tmp_path, stores_env, {**PATIENT, "LEASEGATE_QUOTA_PROBE_REQUESTS": "1"}
    ) as gateway:
        yield gateway


@pytest.fixture
async def patient_gw(gw: Gateway) -> Gateway:
    """Requests in flight for a while (answers allowed 5 s to start): the same gateway."""
    return gw


@asynccontextmanager
async def _gateway(
    tmp_path: Path, stores_env: StoresEnv, extra: dict[str, str]
) -> AsyncIterator[Gateway]:
    async with MockUpstream() as upstream:
        local = account_entry(
            "local-main", upstream, {"local": "local-8b"}, provider="openai-compatible"
        )
        local["models"] = {"local": {"served": "local-8b", "rpm": 2, "tpm": 100_000}}
        accounts = [
            account_entry("openai-main", upstream, {"gpt-4o": SERVED, "gpt-mini": "gpt-mini"}),
            local,
            account_entry("claude-main", upstream, {"claude": "claude-x"}, provider="anthropic"),
        ]
        env = gateway_env(tmp_path, accounts, **stores_env, extra=extra)
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


async def quota_shared(gw: Gateway, account_id: str) -> dict[str, Any]:
    """The account's view once the proxy's batched write has reached the shared store."""
    for _ in range(40):
        view = await account_health(gw, account_id)
        if view["quota"]:
            return view
        await asyncio.sleep(0.05)
    raise AssertionError(f"no quota learned for {account_id}")


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
    answered = await gw.chat(minted)
    assert answered.status_code == 200
    # the IETF fields for the key's account and model, never more than the provider said
    assert answered.headers["ratelimit-policy"] == (
        '"requests";q=3;qu="requests", "tokens";q=90000;qu="tokens"'
    )
    assert answered.headers["ratelimit"].startswith('"requests";r=0;t=60, "tokens";r=89')
    calls = upstream.count
    refused = await gw.chat(minted)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "account-quota-exhausted"
    assert 19 <= int(refused.headers["retry-after"]) <= 21
    assert upstream.count == calls, "the provider is not asked what it said it will refuse"
    answered_row, gateway_row = await rows_of(gw, minted, 2)
    assert answered_row["outcome"] == "success"
    assert (gateway_row["outcome"], gateway_row["refusal_reason"]) == (
        "refused",
        "account-quota-exhausted",
    )
    assert (gateway_row["qualifying"], gateway_row["scope"]) == (False, None)
    # the wait the refusal named, which the lease-rate meter counts as time not spent sending
    assert 19_000 <= gateway_row["retry_after_ms"] <= 21_000
    assert answered_row["retry_after_ms"] is None
    view = await account_health(gw, "openai-main")
    assert (view["health"], view["cooling_models"]) == ("healthy", [])
    view = await quota_shared(gw, "openai-main")  # written behind the requests
    (learned,) = view["quota"]
    assert (learned["model"], learned["source"]) == (SERVED, "headers")
    requests, tokens = learned["buckets"]
    assert (requests["dimension"], requests["limit"], requests["remaining"]) == (
        "requests",
        3,
        0,
    )
    assert requests["reset"] is not None
    assert (tokens["dimension"], tokens["limit"]) == ("tokens", 90_000)
    local = await account_health(gw, "local-main")
    assert local["quota"] == [
        {
            "model": "local-8b",
            "source": "declared",
            "observed_at": None,
            "buckets": [
                {"dimension": "requests", "limit": 2, "remaining": None, "reset": None},
                {"dimension": "tokens", "limit": 100_000, "remaining": None, "reset": None},
            ],
        }
    ]
    metrics = await gw.metrics()
    series = f'account="openai-main",dimension="requests",model="{SERVED}"'
    assert f"leasegate_quota_remaining{{{series}}} 0.0" in metrics
    assert 'leasegate_proxy_refusals_total{code="account-quota-exhausted"} 1.0' in metrics

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
    # headers it cannot read are no headers: the declared rpm still holds
    upstream.script = lambda r: Reply(headers={"x-ratelimit-remaining-requests": "n/a"})
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


async def test_anthropic_headers_hold_messages_and_token_counting_is_not_its_quota(
    gw: Gateway,
) -> None:
    upstream = gw.upstreams[0]
    now = datetime.now(UTC)
    empty = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": (now + timedelta(seconds=30)).isoformat(),
    }
    upstream.script = lambda r: Reply(headers=empty)
    minted = await gw.minted(model="claude", dispatch_id="d-q-9")
    headers = {"x-api-key": minted["key"], "anthropic-version": "2023-06-01"}
    body = {"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}

    async def call(path: str) -> int:
        answer = await gw.client.post(f"{gw.proxy_url}{path}", json=body, headers=headers)
        return answer.status_code

    # token counting has limits of its own: what its answer says holds nothing
    assert [await call("/v1/messages/count_tokens") for _ in range(2)] == [200, 200]
    assert await call("/v1/messages") == 200  # learns: no request left for ~30 s
    calls = upstream.count
    assert await call("/v1/messages") == 429
    assert upstream.count == calls


async def test_an_early_answer_does_not_free_the_room_of_requests_still_in_flight(
    patient_gw: Gateway,
) -> None:
    """A provider bucket counts each request as it arrives; the answer to the first of three
    concurrent requests comes back first and says what remained before the other two. The
    proxy must not take that as room: the other two already hold it."""
    upstream = patient_gw.upstreams[0]
    state = {"remaining": 5, "arrived": 0}
    limited = Reply.json_error(
        429,
        {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "slow down"}},
        {"retry-after": "30"},
    )

    def bucket(_: MockRequest) -> Reply:
        state["arrived"] += 1
        if state["remaining"] == 0:
            return limited
        state["remaining"] -= 1
        # the concurrent three, then the three after them (each answer takes a while)
        delay = {1: 0.0, 2: 0.5, 3: 1.5, 4: 1.5}.get(state["arrived"], 0.3)
        return Reply(
            headers=limits((6, state["remaining"], "60s"), (90_000, 80_000, "1s")),
            headers_delay_s=delay,
        )

    upstream.script = bucket
    minted = await patient_gw.minted(model="gpt-4o", dispatch_id="d-q-flight")
    assert (await patient_gw.chat(minted)).status_code == 200  # the view learns: 4 left
    first = asyncio.create_task(patient_gw.chat(minted))
    await asyncio.sleep(0.1)
    slow = [asyncio.create_task(patient_gw.chat(minted)) for _ in range(2)]
    assert (await first).status_code == 200  # it says 3 left; the two in flight hold 2
    await asyncio.sleep(0.2)  # the proxy has ended the first's attempt (its row, its quota)
    after = await asyncio.gather(*(patient_gw.chat(minted) for _ in range(3)))  # at once
    assert [s.status_code for s in await asyncio.gather(*slow)] == [200, 200]
    after = sorted(after, key=lambda a: a.status_code)
    assert [a.status_code for a in after] == [200, 429, 429]
    assert [a.json()["error"]["code"] for a in after[1:]] == ["account-quota-exhausted"] * 2
    assert upstream.count == 5, "the provider is never sent what it will refuse"


async def test_a_fresh_pair_is_sent_one_request_until_its_first_answer_states_its_quota(
    probing_gw: Gateway,
) -> None:
    """A fleet's first requests on an account nothing is known of: the provider's bucket may
    be nearly empty, so the proxy sends one request until the first answer's headers say how
    much there is; the others are refused at once with a short `Retry-After`, not sent. A
    request the gateway refused before sending anything tells nobody the pair answers
    without headers."""
    upstream = probing_gw.upstreams[0]
    left = [2]

    def bucket(_: MockRequest) -> Reply:
        left[0] -= 1
        headers = limits((10, left[0], "60s"), (90_000, 80_000, "1s"))
        return Reply(headers=headers, headers_delay_s=0.6)

    upstream.script = bucket
    minted = await probing_gw.minted(model="gpt-4o", dispatch_id="d-q-probe")
    wrong = await probing_gw.chat(minted, model="gpt-mini")  # refused before anything is sent
    assert wrong.status_code >= 400
    assert upstream.count == 0
    await asyncio.sleep(0.5)  # past the view's write: nothing was stated for the pair
    assert (await account_health(probing_gw, "openai-main"))["quota"] == []

    first = asyncio.create_task(probing_gw.chat(minted))
    await asyncio.sleep(0.2)
    behind = await probing_gw.chat(minted)
    assert behind.status_code == 429
    assert behind.json()["error"]["code"] == "account-quota-exhausted"
    assert 0 < behind.json()["error"]["retry_after_s"] <= 1
    assert upstream.count == 1, "one request until the provider has said what it has"
    assert (await first).status_code == 200  # it says: one request left
    assert (await probing_gw.chat(minted)).status_code == 200
    refused = await probing_gw.chat(minted)
    assert refused.json()["error"]["code"] == "account-quota-exhausted"
    assert int(refused.headers["retry-after"]) > 1  # the provider's own reset now
    assert upstream.count == 2
