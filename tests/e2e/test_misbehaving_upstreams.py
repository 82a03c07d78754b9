"""The proxy against a misbehaving upstream, one test per row of the table in
docs/upstream-failures.md, over real HTTP with a scripted mock upstream: what the client sees,
the evidence row, the health effect (thresholds are 1), and that nothing was retried."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import Reply
from tests.fixtures.gateways import Gateway
from tests.fixtures.scripted import (
    CLAUDE_FIRST_TOKEN_S,
    HEADERS_S,
    IDLE_S,
    account_health,
    anthropic_stream,
    call,
    only_row,
    openai_stream,
    script,
    scripted_gateway,
    sse_events,
    without_usage,
)

GPT = "gpt-4o-2024-08-06"


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with scripted_gateway(tmp_path) as gateway:
        yield gateway


def assert_row(row: dict[str, Any], outcome: str, scope: str | None, qualifying: bool) -> None:
    assert (row["outcome"], row["scope"], row["qualifying"]) == (outcome, scope, qualifying), row


async def assert_model_cooling(gateway: Gateway, account_id: str, served: str) -> None:
    account = await account_health(gateway, account_id)
    assert account["health"] == "cooling"
    assert [c["model"] for c in account["cooling_models"]] == [served]
    assert account["circuit"]["open"] is False


async def assert_healthy(gateway: Gateway, account_id: str) -> None:
    account = await account_health(gateway, account_id)
    assert (account["health"], account["cooling_models"]) == ("healthy", [])
    assert account["circuit"]["open"] is False


def appended_error(events: Sequence[tuple[str | None, Any]], dialect: str) -> dict[str, Any]:
    """The last event must be the gateway's error in the provider's own shape."""
    name, data = events[-1]
    if dialect == "anthropic":
        assert name == "error"
        assert data["type"] == "error"
    else:
        assert name is None  # OpenAI: a plain `data: {"error": ...}` event
        assert set(data) == {"error"}
    error: dict[str, Any] = data["error"]
    return error


async def test_no_headers_is_a_504_after_the_headers_timeout(gw: Gateway) -> None:
    script(gw, Reply(headers_delay_s=math.inf))
    minted, response, raw = await call(gw)
    assert response.status_code == 504
    assert json.loads(raw)["error"]["code"] == "upstream-timeout"
    row = await only_row(gw, minted)
    assert_row(row, "timeout", "model", True)
    assert row["upstream_status"] is None
    assert row["duration_ms"] >= HEADERS_S * 1000 * 0.9
    await assert_model_cooling(gw, "openai-main", GPT)
    assert gw.upstreams[0].count == 1


async def test_refused_connection_opens_the_circuit(gw: Gateway) -> None:
    minted, response, raw = await call(gw, "gpt-dead")
    assert response.status_code == 502
    assert json.loads(raw)["error"]["code"] == "upstream-unreachable"
    row = await only_row(gw, minted)
    assert_row(row, "connect-error", "account", True)
    account = await account_health(gw, minted["account_id"])
    assert account["health"] == "circuit-open"
    assert account["circuit"]["open"] is True
    assert gw.upstreams[0].count == 0


async def test_reset_after_the_request_went_out_cools_the_model_only(gw: Gateway) -> None:
    """The caller's own request may have provoked the reset: never account-level."""
    script(gw, Reply(reset=True))
    minted, response, raw = await call(gw)
    assert response.status_code == 502
    assert json.loads(raw)["error"]["code"] == "upstream-unreachable"
    row = await only_row(gw, minted)
    assert_row(row, "upstream-error", "model", True)
    assert row["error_code"] == "connection-dropped"
    await assert_model_cooling(gw, "openai-main", GPT)
    account = await account_health(gw, minted["account_id"])
    assert account["circuit"]["open"] is False
    assert gw.upstreams[0].count == 1


async def test_slow_first_token_appends_an_error_event(gw: Gateway) -> None:
    # The preamble arrives at once and every gap (0.5 s) is well inside claude-main's idle
    # deadline (2 s); the first text delta comes 1.5 s in, past its first-token deadline.
    script(gw, Reply(chunks=anthropic_stream(), chunk_delays=[0, 0.5, 0.5, 0.5]))
    minted, response, raw = await call(gw, "claude-x")
    assert response.status_code == 200
    events = sse_events(raw)
    assert [name for name, _ in events[:-1]] == ["message_start", "content_block_start"]
    error = appended_error(events, "anthropic")
    assert error["code"] == "upstream-timeout"
    assert f"{CLAUDE_FIRST_TOKEN_S:g} s" in error["message"]
    row = await only_row(gw, minted)
    assert_row(row, "timeout", "model", True)
    assert row["upstream_status"] == 200
    await assert_model_cooling(gw, "claude-main", "claude-x-2026")
    assert gw.upstreams[0].count == 1


async def test_mid_stream_stall_appends_an_error_event(gw: Gateway) -> None:
    chunks = openai_stream()
    script(gw, Reply(chunks=chunks, chunk_delays=[0, 0, 3 * IDLE_S]))
    minted, response, raw = await call(gw)
    assert response.status_code == 200
    assert raw.startswith(chunks[0] + chunks[1])  # what arrived passed through unchanged
    events = sse_events(raw)
    assert len(events) == 3
    assert appended_error(events, "openai")["code"] == "upstream-timeout"
    row = await only_row(gw, minted)
    assert_row(row, "timeout", "model", True)
    await assert_model_cooling(gw, "openai-main", GPT)
    assert gw.upstreams[0].count == 1


@pytest.mark.parametrize(
    ("model", "dialect", "served"),
    [("gpt-4o", "openai", GPT), ("claude-x", "anthropic", "claude-x-2026")],
)
async def test_cut_stream_appends_an_error_event_in_the_providers_shape(
    gw: Gateway, model: str, dialect: str, served: str
) -> None:
    chunks = openai_stream() if dialect == "openai" else anthropic_stream()
    script(gw, Reply(chunks=chunks, cut_after=3))  # mid-answer: before any finish reason
    minted, response, raw = await call(gw, model)
    assert response.status_code == 200
    assert raw.startswith(b"".join(chunks[:3]))
    events = sse_events(raw)
    assert len(events) == 4, "never a silent clean end"
    assert appended_error(events, dialect)["code"] == "upstream-truncated"
    row = await only_row(gw, minted)
    assert_row(row, "in-stream-error", "model", True)
    assert row["error_code"] == "truncated"
    await assert_model_cooling(gw, minted["account_id"], served)
    assert gw.upstreams[0].count == 1


async def test_one_malformed_chunk_is_dropped_a_success_with_a_count(gw: Gateway) -> None:
    chunks = openai_stream()
    garbled = b'data: {"choices": [{"delta": {"content": "cut\n\n'
    script(gw, Reply(chunks=[*chunks[:2], garbled, *chunks[2:]]))
    minted, response, raw = await call(gw)
    assert response.status_code == 200
    # every other event byte-exact, the garbled one dropped (and the usage the proxy asked for)
    assert raw == without_usage(chunks)
    row = await only_row(gw, minted)
    assert_row(row, "success", None, False)
    assert row["malformed_chunks"] == 1
    assert (row["input_tokens"], row["output_tokens"]) == (7, 4)
    await assert_healthy(gw, "openai-main")


@pytest.mark.parametrize(
    "ending",
    [
        Reply(),
        Reply(end_delay_s=60.0),
        Reply(cut_after=6),
    ],
    ids=["closed", "held-open", "cut-after-usage"],
)
async def test_complete_stream_without_done_ends_promptly_with_usage(
    gw: Gateway, ending: Reply
) -> None:
    # held-open: the upstream sends the whole answer, then neither [DONE] nor the end of the
    # body; the proxy ends the stream cleanly once it goes quiet, not after 60 s. cut-after-
    # usage: the connection drops once the answer is whole: nothing was lost, nothing to add.
    chunks = openai_stream(done=False)
    script(gw, replace(ending, chunks=chunks))
    minted, response, raw = await call(gw)
    assert response.status_code == 200
    assert raw == without_usage(chunks)
    row = await only_row(gw, minted)
    assert_row(row, "success", None, False)
    assert row["error_code"] is None
    assert (row["input_tokens"], row["output_tokens"]) == (7, 4)
    assert row["duration_ms"] < 30_000
    await assert_healthy(gw, "openai-main")


@pytest.mark.parametrize(
    "error",
    [
        {
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
        {
            "message": "The response was filtered due to the prompt triggering a content policy.",
            "type": "invalid_request_error",
            "param": "prompt",
            "code": "content_filter",
        },
    ],
    ids=["context-length", "content-filter"],
)
async def test_a_400_refusal_passes_through_and_does_not_qualify(
    gw: Gateway, error: dict[str, Any]
) -> None:
    script(gw, Reply.json_error(400, {"error": error}))
    minted, response, raw = await call(gw)
    assert response.status_code == 400
    assert json.loads(raw) == {"error": error}  # the upstream's own body, unchanged
    row = await only_row(gw, minted)
    if error["code"] == "context_length_exceeded":
        # its own class: model scope on the row, yet no health failure and no ordinary hop
        assert_row(row, "context-length-exceeded", "model", False)
        assert row["error_code"] == "context_length_exceeded"
    else:
        assert_row(row, "upstream-error", None, False)
        assert row["error_code"] == "http-400"
    assert row["upstream_status"] == 400
    await assert_healthy(gw, "openai-main")
    assert gw.upstreams[0].count == 1
