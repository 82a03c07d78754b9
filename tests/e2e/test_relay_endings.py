"""How a proxied stream ends, as its caller and its evidence see it: one terminal row whatever
ended it; an upstream error inside a 200 stream is on record before the caller reads it, and
stays the request's one row while the stream goes on; a caller that hangs up mid-answer is
heard at once (the relay stops, the row says `client-abort`), not when the upstream ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import Reply
from tests.fixtures.gateways import Gateway
from tests.fixtures.scripted import openai_chunk, openai_stream, script, scripted_gateway

LATE_S = 0.4
"""The pause before each chunk the upstream sends after the point the caller acts."""

ERROR_EVENT = (
    b"data: "
    + json.dumps({"error": {"type": "server_error", "code": "internal_error", "message": "x"}})
    .replace(" ", "")
    .encode()
    + b"\n\n"
)


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with scripted_gateway(tmp_path) as gateway:
        yield gateway


async def _rows_now(gateway: Gateway, minted: dict[str, Any]) -> list[dict[str, Any]]:
    """The decision's rows as stored at this moment (no waiting for the buffered writer)."""
    path = f"/evidence?decision_id={minted['mint_decision_id']}"
    rows: list[dict[str, Any]] = (await gateway.control_get(path))["evidence"]
    return rows


def _open(gateway: Gateway, minted: dict[str, Any]) -> Any:
    return gateway.client.stream(
        "POST",
        f"{gateway.url}/v1/chat/completions",
        json={"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "x"}]},
        headers={"Authorization": f"Bearer {minted['key']}"},
    )


async def test_an_error_inside_a_200_stream_is_one_row_on_record_before_the_caller_reads_it(
    gw: Gateway,
) -> None:
    head = openai_stream(words=2)[:2]
    tail = [openai_chunk(f"late{i} ") for i in range(3)] + [b"data: [DONE]\n\n"]
    delays = [0.0] * (len(head) + 1) + [LATE_S] * len(tail)
    script(gw, Reply(chunks=[*head, ERROR_EVENT, *tail], chunk_delays=delays))
    minted = await gw.minted(dispatch_id="in-stream-error")
    async with _open(gw, minted) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if "internal_error" in line:
                break
        # the caller has the error: its row is already stored, as a hop may cite it now
        (row,) = await _rows_now(gw, minted)
        assert (row["outcome"], row["scope"], row["qualifying"]) == (
            "in-stream-error",
            "model",
            True,
        )
        assert row["error_code"] == "internal_error"
    # the caller hung up while the upstream still streamed: no second row for the request
    await asyncio.sleep(LATE_S * (len(tail) + 1))
    assert [r["request_id"] for r in await _rows_now(gw, minted)] == [row["request_id"]]


async def test_a_caller_hanging_up_mid_stream_is_heard_at_once(gw: Gateway) -> None:
    chunks = openai_stream(words=8)
    script(gw, Reply(chunks=chunks, chunk_delay_s=LATE_S))
    whole_s = LATE_S * (len(chunks) - 1)
    minted = await gw.minted(dispatch_id="hang-up-mid-stream")
    async with _open(gw, minted) as response:
        assert response.status_code == 200
        async for _ in response.aiter_raw():
            break  # the caller goes away after the first chunk
    (row,) = await gw.evidence_for(minted["mint_decision_id"])
    assert (row["outcome"], row["qualifying"]) == ("client-abort", False)
    # ended when the caller left, not when the upstream would have finished
    assert row["duration_ms"] < whole_s * 1000 / 2
    assert row["output_tokens"] is not None  # charged an estimate, never free
