"""`Dispatch` against a two-account pool (tests/fixtures/pool.py) whose first account
misbehaves in each way of docs/upstream-failures.md and whose second is healthy, over real
HTTP: a qualifying failure completes on the backup (position 0 hop 0, then position 1 hop 1)
with at most one live lease at any sample and the primary's evidence row saying what
happened; a failure that does not qualify either is a success on the primary (malformed
chunk, no [DONE]) or stops at once without a hop (a 400). The plain-client half of the same
table is tests/e2e/test_misbehaving_upstreams.py. Last, a pool whose accounts all stall ends
within its deadline with the last refusal."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.client import Dispatch, DispatchFailed, post_json, stream_events
from leasegate.demo.upstream import Reply
from tests.fixtures.pool import TENANT, Pool, lease_watch, running_pool
from tests.fixtures.scripted import anthropic_stream, openai_stream

HEADERS_S = 0.8
IDLE_S = 1.0
FIRST_TOKEN_S = 0.6
# Small timeouts for both accounts: the backup answers at once, so only the primary's
# scripted misbehaviour can run into them.
ENV = {
    "LEASEGATE_UPSTREAM_HEADERS_TIMEOUT_S": str(HEADERS_S),
    "LEASEGATE_STREAM_IDLE_TIMEOUT_S": str(IDLE_S),
    "LEASEGATE_FIRST_TOKEN_TIMEOUT_S": str(FIRST_TOKEN_S),
}
DEADLINE_S = 20.0

Call = Callable[[str, str], Awaitable[Any]]


@pytest.fixture
def mode() -> str:
    """Embedded is enough: no row needs Redis, and test_client_dispatch.py runs Dispatch on
    Postgres and Redis."""
    return "embedded"


@pytest.fixture
async def pool(tmp_path: Path, stores_env: dict[str, str]) -> AsyncIterator[Pool]:
    async with running_pool(tmp_path, stores_env, ENV) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def caller(http: httpx.AsyncClient, model: str, *, stream: bool) -> Call:
    """A plain-httpx call for `model`: /v1/messages for claude-x, chat completions else."""
    anthropic = model.startswith("claude")
    path = "/v1/messages" if anthropic else "/v1/chat/completions"
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if anthropic:
        body["max_tokens"] = 16

    async def call(key: str, proxy_url: str) -> Any:
        if stream:
            return await stream_events(http, proxy_url, key, path, body)
        return await post_json(http, proxy_url, key, path, body)

    return call


def dispatch(pool: Pool, model: str, deadline_s: float = DEADLINE_S) -> Dispatch[Any]:
    return Dispatch(
        pool.control, pool.url, tenant=TENANT, dispatch_id="d-1", model=model, deadline_s=deadline_s
    )


async def run_watched(pool: Pool, model: str, call: Call) -> tuple[Any, list[int]]:
    """Run the dispatch while sampling the live leases over every account."""
    async with lease_watch(pool) as leases:
        try:
            result: Any = await dispatch(pool, model).run(call)
        except DispatchFailed as failed:
            result = failed
    assert leases, "the watch took no sample"
    return result, leases


async def only_row(pool: Pool, decision_id: str) -> dict[str, Any]:
    (row,) = await pool.gateway.evidence_for(decision_id)
    return row


async def no_live_lease(pool: Pool) -> None:
    view = await pool.control.accounts()
    assert sum(a.leases_held for a in view.accounts) == 0


@dataclass(frozen=True)
class Hop:
    """A primary failure that qualifies: what the dispatch noted and the evidence row says."""

    reply: Reply | None
    """None: the primary's port refuses connections (its mock upstream is stopped)."""
    model: str
    stream: bool
    ended: str
    outcome: str
    scope: str
    error_code: str | None = None


HOPS = [
    pytest.param(
        Hop(Reply(headers_delay_s=math.inf), "gpt-4o", False, "status 504 upstream-timeout",
            "timeout", "model"),
        id="headers-never-sent",
    ),
    pytest.param(
        Hop(Reply(reset=True), "gpt-4o", False, "status 502 upstream-unreachable",
            "upstream-error", "model", "connection-dropped"),
        id="reset-before-headers",
    ),
    pytest.param(
        Hop(None, "gpt-4o", False, "status 502 upstream-unreachable", "connect-error", "account"),
        id="refused-before-headers",
    ),
    pytest.param(
        # the preamble arrives at once, every gap (0.4 s) is inside the idle deadline, the
        # first text delta 1.2 s in is past the first-token deadline
        Hop(Reply(chunks=anthropic_stream(), chunk_delays=[0, 0.4, 0.4, 0.4]), "claude-x", True,
            "in-stream error upstream-timeout", "timeout", "model"),
        id="slow-first-token",
    ),
    pytest.param(
        Hop(Reply(chunks=openai_stream(), chunk_delays=[0, 0, 3 * IDLE_S]), "gpt-4o", True,
            "in-stream error upstream-timeout", "timeout", "model"),
        id="mid-stream-stall",
    ),
    pytest.param(
        Hop(Reply(chunks=openai_stream(), cut_after=3), "gpt-4o", True,
            "in-stream error upstream-truncated", "in-stream-error", "model", "truncated"),
        id="cut-mid-answer-openai",
    ),
    pytest.param(
        Hop(Reply(chunks=anthropic_stream(), cut_after=3), "claude-x", True,
            "in-stream error upstream-truncated", "in-stream-error", "model", "truncated"),
        id="cut-mid-answer-anthropic",
    ),
]  # fmt: skip


@pytest.mark.parametrize("row", HOPS)
async def test_a_qualifying_failure_completes_on_the_second_account(
    pool: Pool, http: httpx.AsyncClient, row: Hop
) -> None:
    if row.reply is None:
        await pool.primary.stop()
    else:
        pool.primary_script.reply = row.reply
    result, leases = await run_watched(pool, row.model, caller(http, row.model, stream=row.stream))
    assert not isinstance(result, DispatchFailed), result.chain
    assert max(leases) <= 1  # never two live leases of the dispatch
    first, hop = result.chain
    primary, backup = ("claude-a", "claude-b") if row.model == "claude-x" else ("primary", "backup")
    assert (first.account_id, first.fallback_position, first.hop) == (primary, 0, 0)
    assert first.ended == row.ended
    assert (hop.account_id, hop.fallback_position, hop.hop, hop.kind) == (backup, 1, 1, "retry")
    assert (hop.ended, result.decision) == (None, hop)
    assert pool.backup.count == 1
    assert pool.primary.count == (0 if row.reply is None else 1)  # nothing retried inside
    served = f"{row.model}-b" if row.model == "claude-x" else "gpt-4o-b"
    assert served in repr(result.answer)  # the backup's answer, echoing its served model

    evidence = await only_row(pool, first.mint_decision_id)
    assert (evidence["outcome"], evidence["scope"], evidence["qualifying"]) == (
        row.outcome,
        row.scope,
        True,
    ), evidence
    if row.error_code is not None:
        assert evidence["error_code"] == row.error_code
    assert (await pool.control.get_key(first.key_id)).state == "revoked"
    view = await pool.control.decision(hop.mint_decision_id)
    assert view.retry_of_mint_decision_id == first.mint_decision_id
    assert (await only_row(pool, hop.mint_decision_id))["outcome"] == "success"
    await no_live_lease(pool)


def malformed_stream() -> list[bytes]:
    chunks = openai_stream()
    chunks.insert(2, b'data: {"choices": [{"delta": {"content": "cut\n\n')
    return chunks


@pytest.mark.parametrize(
    ("reply", "malformed"),
    [
        (Reply(chunks=malformed_stream()), 1),
        (Reply(chunks=openai_stream(done=False)), 0),
        (Reply(chunks=openai_stream(done=False), end_delay_s=60.0), 0),
    ],
    ids=["one-malformed-chunk", "no-done-closed", "no-done-held-open"],
)
async def test_a_flawed_but_complete_stream_is_a_success_on_the_first_account(
    pool: Pool, http: httpx.AsyncClient, reply: Reply, malformed: int
) -> None:
    pool.primary_script.reply = reply
    result, leases = await run_watched(pool, "gpt-4o", caller(http, "gpt-4o", stream=True))
    assert not isinstance(result, DispatchFailed), result.chain
    assert max(leases) <= 1
    (only,) = result.chain
    assert (only.account_id, only.fallback_position, only.hop, only.ended) == (
        "primary",
        0,
        0,
        None,
    )
    words = "".join(
        event["choices"][0]["delta"]["content"] for event in result.answer if event["choices"]
    )
    assert words == "w0 w1 w2 w3 "  # the whole answer; a malformed chunk is skipped
    assert (pool.primary.count, pool.backup.count) == (1, 0)
    evidence = await only_row(pool, only.mint_decision_id)
    assert (evidence["outcome"], evidence["scope"], evidence["qualifying"]) == (
        "success",
        None,
        False,
    )
    assert evidence["malformed_chunks"] == malformed
    assert (evidence["input_tokens"], evidence["output_tokens"]) == (7, 4)
    await no_live_lease(pool)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    "code", ["context_length_exceeded", "content_filter"], ids=["context-length", "content-filter"]
)
async def test_a_400_refusal_stops_at_once_without_a_hop(
    pool: Pool, http: httpx.AsyncClient, code: str, stream: bool
) -> None:
    error = {"message": "refused", "type": "invalid_request_error", "param": None, "code": code}
    pool.primary_script.reply = Reply.json_error(400, {"error": error})
    result, leases = await run_watched(pool, "gpt-4o", caller(http, "gpt-4o", stream=stream))
    assert isinstance(result, DispatchFailed)
    assert max(leases) <= 1
    assert result.reason == "call-failed"
    assert result.refusal is None  # no hop was even asked for
    assert getattr(result.failure, "status", None) == 400
    assert getattr(result.failure, "code", None) == code  # the upstream's own error
    (only,) = result.chain
    assert (only.account_id, only.ended) == ("primary", f"status 400 {code}")
    assert (pool.primary.count, pool.backup.count) == (1, 0)
    assert [d.kind for d in await pool.control.decisions(TENANT, "d-1")] == ["fresh"]
    evidence = await only_row(pool, only.mint_decision_id)
    assert (evidence["outcome"], evidence["scope"], evidence["qualifying"]) == (
        "upstream-error",
        None,
        False,
    )
    assert evidence["upstream_status"] == 400
    await no_live_lease(pool)


@pytest.mark.parametrize(
    ("reply", "stream"),
    [
        (Reply(chunks=openai_stream(), chunk_delays=[0, 0, 3 * IDLE_S]), True),
        (Reply(headers_delay_s=math.inf), False),
    ],
    ids=["mid-stream-stall", "headers-never-sent"],
)
async def test_a_pool_whose_accounts_all_stall_ends_within_the_deadline(
    pool: Pool, http: httpx.AsyncClient, reply: Reply, stream: bool
) -> None:
    pool.primary_script.reply = pool.backup_script.reply = reply
    deadline_s = 10.0
    started = time.monotonic()
    with pytest.raises(DispatchFailed) as failed:
        await dispatch(pool, "gpt-4o", deadline_s).run(caller(http, "gpt-4o", stream=stream))
    assert time.monotonic() - started < deadline_s
    assert (failed.value.reason, failed.value.code) == ("refused", "fallback-budget-exhausted")
    assert failed.value.refusal is not None
    assert failed.value.refusal.mint_decision_id is not None
    assert [link.account_id for link in failed.value.chain] == ["primary", "backup"]
    assert (pool.primary.count, pool.backup.count) == (1, 1)
    for link in failed.value.chain:
        assert (await only_row(pool, link.mint_decision_id))["outcome"] == "timeout"
    await no_live_lease(pool)
