"""OpenAI streams are charged whether or not the caller asked for their usage, through real
HTTP, embedded and on Postgres + Redis.

The official `openai` SDK streams without `stream_options` (as most callers do); the demo
upstream, like OpenAI, then reports no usage unless asked. The proxy asks, charges the row and
the budgets, and strips the usage-only chunk from what the SDK yields. A caller that hangs up
after the finish is outlived briefly for the usage; a stream that never reports any is charged
an estimate marked `usage_estimated`.

The demo upstream's stream (chunks=4): prompt 12 tokens (4 cached), completion 4: 16 tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import openai
import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from leasegate.providers.estimate import tokens_for
from leasegate.proxy.tenant_budgets import REFRESH_S
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.scripted import OPENAI_USAGE, openai_chunk, openai_stream
from tests.fixtures.services import StoresEnv

PER_REQUEST = 16
PRICES = {"input": "2.50", "output": "10.00", "cache_read": "1.25"}
COST = (8 * Decimal("2.50") + 4 * Decimal("1.25") + 4 * Decimal("10.00")) / 10**6
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
USAGE_DELAY_S = 2.0
"""Ten grace periods of the past-grace case: a loaded machine must not deliver the usage in time."""


@dataclass
class Scripted:
    """The upstream's script: the default answer unless `reply` is set; keeps every body."""

    reply: Reply | None = None
    bodies: list[Mapping[str, object]] = field(default_factory=list)

    def __call__(self, request: MockRequest) -> Reply | None:
        if request.json is not None:
            self.bodies.append(request.json)
        return self.reply


@dataclass
class Priced:
    gateway: Gateway
    upstream: Scripted


@asynccontextmanager
async def priced_gateway(
    tmp_path: Path, stores_env: StoresEnv, extra: Mapping[str, str] | None = None
) -> AsyncIterator[Priced]:
    script = Scripted()
    async with MockUpstream(script, chunks=4) as upstream:
        model = {"served": "gpt-4o-2024-08-06", "prices": PRICES}
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": model})]  # type: ignore[dict-item]
        env = gateway_env(tmp_path, accounts, **stores_env, currency="USD", extra=extra)
        async with in_process_gateway(env, [upstream]) as gateway:
            yield Priced(gateway, script)


def _sdk(gateway: Gateway, key: str) -> openai.AsyncOpenAI:
    # max_retries=0: a retry inside the SDK would spend the lease again
    return openai.AsyncOpenAI(base_url=f"{gateway.proxy_url}/v1", api_key=key, max_retries=0)


async def _sdk_stream(gateway: Gateway, key: str, **options: Any) -> list[Any]:
    """Every chunk the SDK yields for one streamed chat."""
    async with _sdk(gateway, key) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-4o", messages=MESSAGES, stream=True, **options
        )
        return [chunk async for chunk in stream]


async def test_an_sdk_stream_without_stream_options_is_charged_and_budgeted(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    async with priced_gateway(tmp_path, stores_env) as priced:
        gw = priced.gateway
        minted = await gw.minted(budget={"max_tokens": PER_REQUEST})
        chunks = await _sdk_stream(gw, minted["key"])
        # the usage-only chunk is the proxy's: `chunk.choices[0]` holds for every chunk
        assert chunks
        assert all(chunk.choices for chunk in chunks)
        assert "".join(c.choices[0].delta.content or "" for c in chunks).startswith("The quick")
        assert all(chunk.usage is None for chunk in chunks)

        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert (row["input_tokens"], row["cache_read_input_tokens"], row["output_tokens"]) == (
            12,
            4,
            4,
        )
        assert Decimal(row["cost"]) == COST
        assert row["usage_estimated"] is False
        (asked,) = priced.upstream.bodies
        assert asked["stream_options"] == {"include_usage": True}

        # the stream spent the dispatch's budget: the next request is refused
        async with _sdk(gw, minted["key"]) as sdk:
            with pytest.raises(openai.APIStatusError) as refused:
                await sdk.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
        assert refused.value.status_code == 402
        assert refused.value.body["code"] == "dispatch-budget-exhausted"  # type: ignore[index]

        report = await gw.control_get("/usage")
        (group,) = report["usage"]
        assert (group["input_tokens"], group["output_tokens"]) == (12, 4)
        assert Decimal(group["cost"]) == COST
        assert group["estimated_requests"] == 0


async def test_a_legacy_completions_stream_is_charged_the_same_way(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    async with priced_gateway(tmp_path, stores_env) as priced:
        gw = priced.gateway
        minted = await gw.minted()
        async with _sdk(gw, minted["key"]) as sdk:
            stream = await sdk.completions.create(model="gpt-4o", prompt="hi", stream=True)
            chunks = [chunk async for chunk in stream]
        assert chunks
        assert all(chunk.choices for chunk in chunks)
        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert (row["endpoint"], row["input_tokens"], row["output_tokens"]) == (
            "/v1/completions",
            12,
            4,
        )
        assert row["usage_estimated"] is False


async def test_a_caller_that_asked_for_usage_gets_its_usage_chunk(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    async with priced_gateway(tmp_path, stores_env) as priced:
        gw = priced.gateway
        minted = await gw.minted()
        options = {"include_usage": True}
        chunks = await _sdk_stream(gw, minted["key"], stream_options=options)
        last = chunks[-1]
        assert last.choices == []
        assert last.usage is not None
        assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (12, 4)
        assert all(chunk.choices for chunk in chunks[:-1])
        (asked,) = priced.upstream.bodies
        assert asked["stream_options"] == options
        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert (row["input_tokens"], row["output_tokens"], row["usage_estimated"]) == (12, 4, False)


def _usage_after_a_pause() -> Reply:
    """A chat stream whose usage comes `USAGE_DELAY_S` after its finish chunk."""
    chunks = openai_stream()
    usage_at = chunks.index(openai_chunk(usage=OPENAI_USAGE))
    delays = [0.0] * len(chunks)
    delays[usage_at] = USAGE_DELAY_S
    return Reply(chunks=chunks, chunk_delays=delays)


async def _hang_up_after_the_finish(gw: Gateway, key: str) -> None:
    """Read the stream up to its `finish_reason`, then close the connection."""
    async with gw.open_chat(key) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if '"finish_reason": "stop"' in line:
                break


@pytest.mark.parametrize(
    ("grace_s", "estimated"), [("5", False), ("0.2", True)], ids=["within-grace", "past-grace"]
)
async def test_a_caller_gone_after_the_finish_is_charged_the_upstreams_usage(
    tmp_path: Path, stores_env: StoresEnv, grace_s: str, estimated: bool
) -> None:
    extra = {"LEASEGATE_STREAM_USAGE_GRACE_S": grace_s}
    async with priced_gateway(tmp_path, stores_env, extra) as priced:
        gw = priced.gateway
        priced.upstream.reply = _usage_after_a_pause()
        minted = await gw.minted()
        await _hang_up_after_the_finish(gw, minted["key"])
        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert row["outcome"] == "client-abort"
        if not estimated:  # read on for the usage: the upstream's own counts
            assert (row["input_tokens"], row["output_tokens"]) == (7, 4)
            assert row["duration_ms"] >= USAGE_DELAY_S * 1000 * 0.9
        else:  # gone past the bound: the estimate, never free
            assert row["input_tokens"] is not None
            assert row["input_tokens"] >= 1
            assert row["output_tokens"] >= 1
        assert Decimal(row["cost"]) > 0
        assert row["usage_estimated"] is estimated


async def _set_tenant_budget(gw: Gateway, tenant: str, max_tokens: int) -> None:
    revision = int((await gw.control_get("/accounts"))["revision"])
    answer = await gw.client.post(
        f"{gw.control_url}/control/v2/tenants/{tenant}/budget",
        json={
            "reason": "test",
            "expected_revision": revision,
            "period": "day",
            "max_tokens": max_tokens,
        },
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "reply",
    [Reply(chunks=openai_stream(usage=False)), Reply(chunks=openai_stream(), cut_after=3)],
    ids=["never-reports", "cut"],
)
async def test_a_stream_without_usage_is_charged_an_estimate_against_both_budgets(
    tmp_path: Path, stores_env: StoresEnv, reply: Reply
) -> None:
    async with priced_gateway(tmp_path, stores_env) as priced:
        gw = priced.gateway
        tenant = "acme/estimated"
        await _set_tenant_budget(gw, tenant, max_tokens=1)
        await asyncio.sleep(REFRESH_S + 0.2)  # a proxy re-reads the tenant budgets this often
        priced.upstream.reply = reply
        minted = await gw.minted(tenant=tenant, budget={"max_tokens": 1})
        sibling = await gw.minted(tenant=tenant, dispatch_id="d-sibling")  # no budget of its own
        async with gw.open_chat(minted["key"]) as response:
            await response.aread()
            body_bytes = int(response.request.headers["content-length"])
        (row,) = await gw.evidence_for(minted["mint_decision_id"])
        assert row["input_tokens"] == tokens_for(body_bytes) > 0
        assert row["output_tokens"] >= 1  # "w0 " ... relayed before the end
        assert Decimal(row["cost"]) > 0
        assert row["usage_estimated"] is True

        again = await gw.chat(minted["key"], stream=True)
        assert again.status_code == 402
        assert again.json()["error"]["code"] == "dispatch-budget-exhausted"
        tenant_spent = await gw.chat(sibling["key"], stream=True)
        assert tenant_spent.status_code == 402
        assert tenant_spent.json()["error"]["code"] == "tenant-budget-exhausted"
        refused = await gw.mint(tenant=tenant, dispatch_id="d-2")
        assert refused.status_code == 402
        assert refused.json()["error"]["code"] == "tenant-budget-exhausted"

        metrics = await gw.metrics(gw.proxy_url)
        assert 'leasegate_proxy_usage_estimated_total{account="openai-main"' in metrics

        report = await gw.control_get("/usage?group_by=tenant")
        (group,) = report["usage"]
        assert (group["input_tokens"], group["output_tokens"]) == (
            row["input_tokens"],
            row["output_tokens"],
        )
        assert group["estimated_requests"] == 1  # of its requests (the refused ones too)
