"""`Dispatch` against a two-account pool (tests/fixtures/pool.py) whose first account
misbehaves in each way of docs/upstream-failures.md and whose second is healthy, over real
HTTP: a qualifying failure completes on the backup (position 0 hop 0, then position 1 hop 1)
with at most one live lease at any sample and the primary's evidence row saying what
happened; a failure that does not qualify either is a success on the primary (malformed
chunk, no [DONE]) or stops at once without a hop (a 400). The plain-client half of the same
table is tests/e2e/test_misbehaving_upstreams.py. Last, a pool whose accounts all stall ends
within its deadline with the last refusal."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from leasegate.client import Dispatch, DispatchFailed, Rejected, post_json, stream_events
from leasegate.demo.upstream import MockRequest, Reply
from tests.fixtures.pool import TENANT, Pool, lease_watch, two_upstream_pool
from tests.fixtures.scripted import anthropic_stream, openai_stream
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv

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
async def pool(tmp_path: Path, stores_env: StoresEnv) -> AsyncIterator[Pool]:
    async with two_upstream_pool(tmp_path, stores_env, ENV) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with local_client(timeout=30) as client:
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
    retried: int = 0
    """Same-lease retries before the hop (a reset before any byte is transient)."""


HOPS = [
    pytest.param(
        Hop(Reply(headers_delay_s=math.inf), "gpt-4o", False, "status 504 upstream-timeout",
            "timeout", "model"),
        id="headers-never-sent",
    ),
    pytest.param(
        Hop(Reply(reset=True), "gpt-4o", False, "status 502 upstream-unreachable",
            "upstream-error", "model", "connection-dropped", retried=1),
        id="reset-before-headers",
    ),
    pytest.param(
        Hop(None, "gpt-4o", False, "status 502 upstream-unreachable", "connect-error", "account",
            retried=1),
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
    assert first.retried == (row.ended,) * row.retried
    assert (hop.account_id, hop.fallback_position, hop.hop, hop.kind) == (backup, 1, 1, "retry")
    assert (hop.ended, result.decision) == (None, hop)
    assert pool.backup.count == 1
    assert pool.primary.count == (0 if row.reply is None else 1 + row.retried)
    served = f"{row.model}-b" if row.model == "claude-x" else "gpt-4o-b"
    assert served in repr(result.answer)  # the backup's answer, echoing its served model

    rows = await pool.gateway.evidence_for(first.mint_decision_id, 1 + row.retried)
    assert len(rows) == 1 + row.retried  # one row per call on the lease
    for evidence in rows:
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
    expected = (
        ("context-length-exceeded", "model")
        if code == "context_length_exceeded"
        else ("upstream-error", None)
    )  # with no context_fallback declared, a context-length row has nowhere to go either
    assert (evidence["outcome"], evidence["scope"], evidence["qualifying"]) == (*expected, False)
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


# -- outage, then recovery (issue 14, item 1), time scaled by 1/10 ---------------------------

SCALE = 0.1
SPACING_S = 4 * SCALE  # twenty requests, 4 s apart
OUTAGE_S = 60 * SCALE  # the primary answers 503 for the first 60 s
BASE_S = 30 * SCALE  # the default base cooldown
JITTER = 0.2  # the default jitter: every window is between 0.8 and 1.0 x BASE_S
BOTH_MODES = pytest.mark.parametrize("mode", ["embedded", "production"])


@dataclass
class Outage:
    """The primary's upstream: 503 until `ends` (monotonic), healthy after; notes each call."""

    ends: float = math.inf
    calls: list[float] = field(default_factory=list)

    def __call__(self, _: MockRequest) -> Reply | None:
        now = time.monotonic()
        self.calls.append(now)
        return Reply(status=503) if now < self.ends else None


@BOTH_MODES
async def test_after_an_outage_the_primary_carries_traffic_again_within_one_base_window(
    tmp_path: Path, stores_env: StoresEnv, http: httpx.AsyncClient
) -> None:
    extra = {**ENV, "LEASEGATE_BASE_COOLDOWN_S": str(BASE_S)}
    async with two_upstream_pool(tmp_path, stores_env, extra) as pool:
        outage = Outage()
        pool.primary.script = outage
        start = time.monotonic()
        outage.ends = start + OUTAGE_S
        served: list[tuple[float, str]] = []
        # twenty requests, then on until one base window (and a gap) past the recovery: a
        # trial that failed just before the recovery closes the pair for one more window
        last = max(20, math.ceil((OUTAGE_S + BASE_S) / SPACING_S) + 2)
        for i in range(last):
            await asyncio.sleep(max(0.0, start + i * SPACING_S - time.monotonic()))
            began = time.monotonic()
            run = Dispatch[Any](
                pool.control, pool.url, tenant=TENANT, dispatch_id=f"d-{i}", model="gpt-4o",
                deadline_s=DEADLINE_S,
            )  # fmt: skip
            result = await run.run(caller(http, "gpt-4o", stream=False))
            served.append((began, result.decision.account_id))
    # every request was answered, on the backup while the primary was out
    assert all(account in ("primary", "backup") for _, account in served)
    # while the primary was failing, the first three calls tripped it; after that it cost at
    # most one trial per window (the windows are at least (1 - JITTER) x BASE_S long)
    failing = [t for t in outage.calls if t < outage.ends]
    trials = failing[3:]
    assert len(trials) <= math.ceil(OUTAGE_S / ((1 - JITTER) * BASE_S))
    gaps = [b - a for a, b in itertools.pairwise(failing[2:])]
    assert all(gap >= (1 - JITTER) * BASE_S - 0.05 for gap in gaps), gaps
    # after the recovery the primary is back within one base window, plus one request gap and
    # one held hop (a dispatch still failing over when the window ends starts the next late)
    back = [t for t, account in served if account == "primary" and t >= outage.ends]
    assert back, (served, outage.calls, outage.ends)
    assert back[0] - outage.ends <= BASE_S + SPACING_S + 1.2, (back[0] - outage.ends, served)
    assert served[-1][1] == "primary"


# -- a transient blip is retried on the same lease (issue 14, item 2) ------------------------


@dataclass
class Once:
    """Answers each scripted reply once, in order, then healthy answers."""

    replies: list[Reply]

    def __call__(self, _: MockRequest) -> Reply | None:
        return self.replies.pop(0) if self.replies else None


@dataclass
class Sleeps:
    """A real sleep that notes how long each wait was."""

    waits: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(seconds)


BLIPS = [
    pytest.param(
        Reply.json_error(429, {"error": {"code": "rate_limit_exceeded"}},
                         {"retry-after-ms": "300"}),
        "status 429 rate_limit_exceeded", 0.3, id="429-retry-after-300ms-once",
    ),
    pytest.param(
        Reply.json_error(429, {"error": {"code": "rate_limit_exceeded"}}, {"retry-after": "2"}),
        "status 429 rate_limit_exceeded", 2.0, id="429-retry-after-2s-once",
    ),
    pytest.param(Reply(status=500), "status 500 http_500", 0.0, id="500-once"),
    pytest.param(Reply(reset=True), "status 502 upstream-unreachable", 0.0, id="reset-once"),
]  # fmt: skip


@BOTH_MODES
@pytest.mark.parametrize(("blip", "reason", "wait"), BLIPS)
async def test_a_transient_blip_is_retried_once_on_the_same_lease(
    pool: Pool, http: httpx.AsyncClient, blip: Reply, reason: str, wait: float
) -> None:
    pool.primary.script = Once([blip])
    sleeps = Sleeps()
    run = Dispatch[Any](
        pool.control, pool.url, tenant=TENANT, dispatch_id="d-1", model="gpt-4o",
        deadline_s=DEADLINE_S, sleep=sleeps,
    )  # fmt: skip
    result = await run.run(caller(http, "gpt-4o", stream=False))
    (only,) = result.chain  # no hop: the same lease answered
    assert (only.account_id, only.ended, only.retried) == ("primary", None, (reason,))
    assert sleeps.waits == [wait]  # the upstream's Retry-After, sub-second included
    assert (pool.primary.count, pool.backup.count) == (2, 0)
    assert "gpt-4o-a" in repr(result.answer)
    rows = await pool.gateway.evidence_for(only.mint_decision_id, 2)
    assert sorted(r["outcome"] for r in rows) == sorted(
        ["success", "upstream-error"]  # a reset after the request went out: model scope
    )
    await no_live_lease(pool)


async def test_a_second_failure_hops_and_zero_retries_hop_at_once(
    pool: Pool, http: httpx.AsyncClient
) -> None:
    pool.primary.script = Once([Reply(status=500), Reply(status=500)])
    call = caller(http, "gpt-4o", stream=False)
    result = await dispatch(pool, "gpt-4o").run(call)
    first, hop = result.chain
    assert (first.account_id, first.retried) == ("primary", ("status 500 http_500",))
    assert first.ended == "status 500 http_500"
    assert (hop.account_id, hop.retried, hop.ended) == ("backup", (), None)
    assert (pool.primary.count, pool.backup.count) == (2, 1)

    pool.primary.script = Once([Reply(status=500)])
    run = Dispatch[Any](
        pool.control, pool.url, tenant=TENANT, dispatch_id="d-2", model="gpt-4o",
        deadline_s=DEADLINE_S, same_account_retries=0,
    )  # fmt: skip
    result = await run.run(call)
    first, hop = result.chain
    assert (first.account_id, first.retried, hop.account_id) == ("primary", (), "backup")
    assert (pool.primary.count, pool.backup.count) == (3, 2)


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json_error(429, {"error": {"code": "rate_limit_exceeded"}}, {"retry-after": "30"}),
        Reply.json_error(429, {"error": {"code": "rate_limit_exceeded"}}),
    ],
    ids=["retry-after-beyond-the-bound", "no-retry-after"],
)
async def test_a_429_without_a_short_retry_after_hops_at_once(
    pool: Pool, http: httpx.AsyncClient, reply: Reply
) -> None:
    pool.primary.script = Once([reply])
    result = await dispatch(pool, "gpt-4o").run(caller(http, "gpt-4o", stream=False))
    first, hop = result.chain
    assert (first.account_id, first.retried, hop.account_id) == ("primary", (), "backup")
    assert (pool.primary.count, pool.backup.count) == (1, 1)


async def test_no_retry_once_content_reached_the_worker(
    pool: Pool, http: httpx.AsyncClient
) -> None:
    pool.primary.script = Once([Reply(chunks=openai_stream(), cut_after=3)])
    result = await dispatch(pool, "gpt-4o").run(caller(http, "gpt-4o", stream=True))
    first, hop = result.chain
    assert (first.account_id, first.retried, hop.account_id) == ("primary", (), "backup")
    assert (pool.primary.count, pool.backup.count) == (1, 1)


# -- a malformed event mid-stream, through the official openai SDK (issue 14, item 4) --------


def tenth_event_garbled() -> list[bytes]:
    chunks = openai_stream(words=12)
    chunks.insert(9, b'data: {"choices": [{"delta": {"content": "garbled\n\n')
    return chunks


async def openai_sdk_stream(key: str, proxy_url: str) -> str:
    async with openai.AsyncOpenAI(base_url=f"{proxy_url}/v1", api_key=key, max_retries=0) as sdk:
        chunks = await sdk.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return "".join([c.delta.content or "" async for chunk in chunks for c in chunk.choices])


@BOTH_MODES
async def test_the_proxy_drops_a_malformed_event_and_the_sdk_reads_the_rest(pool: Pool) -> None:
    pool.primary_script.reply = Reply(chunks=tenth_event_garbled())
    run = Dispatch[str](
        pool.control, pool.url, tenant=TENANT, dispatch_id="d-1", model="gpt-4o",
        deadline_s=DEADLINE_S, failures=(openai.APIError,),
    )  # fmt: skip
    result = await run.run(openai_sdk_stream)
    assert result.answer == "".join(f"w{i} " for i in range(12))  # every word, nothing garbled
    (only,) = result.chain
    assert (only.account_id, only.ended) == ("primary", None)
    evidence = await only_row(pool, only.mint_decision_id)
    assert (evidence["outcome"], evidence["malformed_chunks"]) == ("success", 1)
    await no_live_lease(pool)


async def test_byte_exact_pass_through_and_dispatch_reads_the_sdks_decode_error(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    extra = {"primary": {"pass_malformed_events": True}}
    async with two_upstream_pool(tmp_path, stores_env, ENV, accounts_extra=extra) as pool:
        pool.primary_script.reply = Reply(chunks=tenth_event_garbled())
        async with local_client(timeout=30) as http:
            key = (await pool.control.mint(TENANT, "d-raw", "gpt-4o")).key
            assert key is not None
            # a caller that asked for the usage: nothing of the stream is the proxy's to strip
            usage = {"include_usage": True}
            body = {"model": "gpt-4o", "messages": [], "stream": True, "stream_options": usage}
            raw = await http.post(
                f"{pool.url}/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
            )
        assert raw.content == b"".join(tenth_event_garbled())  # every byte, as it came
        run = Dispatch[str](
            pool.control, pool.url, tenant=TENANT, dispatch_id="d-1", model="gpt-4o",
            deadline_s=DEADLINE_S, failures=(openai.APIError,),
        )  # fmt: skip
        with pytest.raises(DispatchFailed) as failed:
            await run.run(openai_sdk_stream)
        # a stream failure (not a bug in the call): a hop is asked for, and refused, since
        # the gateway's row for that stream is a success
        assert isinstance(failed.value.failure, json.JSONDecodeError)
        assert failed.value.reason == "refused"
        (only,) = failed.value.chain
        assert only.ended == "stream: malformed event"


# -- a context-length 400 with a fallback declared (issue 14, item 3) ------------------------

LONG_CONTEXT = {
    "primary": {
        "models": {
            "gpt-4o": {"served": "gpt-4o-a", "context_window": 8192,
                       "context_fallback": "gpt-4o-long"},
            "solo": "solo-a",
        }
    },
    "backup": {
        "models": {"gpt-4o": "gpt-4o-b",
                   "gpt-4o-long": {"served": "gpt-4o-long-b", "context_window": 128000}}
    },
}  # fmt: skip
TOO_LONG: dict[str, dict[str, object]] = {
    "openai": {"error": {"message": "This model's maximum context length is 8192 tokens.",
                         "type": "invalid_request_error", "param": "messages",
                         "code": "context_length_exceeded"}},
    "anthropic": {"type": "error",
                  "error": {"type": "invalid_request_error",
                            "message": "prompt is too long: 9001 tokens > 8192 maximum"}},
    "openrouter": {"error": {"code": 400, "message": "This endpoint's maximum context length is "
                             "8192 tokens. However, you requested about 9001 tokens."}},
}  # fmt: skip


@BOTH_MODES
@pytest.mark.parametrize("shape", list(TOO_LONG))
async def test_a_context_length_400_hops_to_the_declared_fallback_model(
    tmp_path: Path, stores_env: StoresEnv, http: httpx.AsyncClient, shape: str
) -> None:
    async with two_upstream_pool(tmp_path, stores_env, ENV, accounts_extra=LONG_CONTEXT) as pool:
        pool.primary_script.reply = Reply.json_error(400, TOO_LONG[shape])
        # the worker keeps asking for gpt-4o: the fallback's key takes that name too
        result = await dispatch(pool, "gpt-4o").run(caller(http, "gpt-4o", stream=False))
        first, hop = result.chain
        assert (first.account_id, first.served_model) == ("primary", "gpt-4o-a")
        assert first.ended is not None
        assert first.ended.startswith("status 400")
        assert (hop.account_id, hop.served_model, hop.kind, hop.hop) == (
            "backup", "gpt-4o-long-b", "retry", 1,
        )  # fmt: skip
        assert hop.fallback_position == 0  # the fallback model's own list, from the top
        assert "gpt-4o-long-b" in repr(result.answer)
        row = await only_row(pool, first.mint_decision_id)
        assert (row["outcome"], row["scope"], row["qualifying"]) == (
            "context-length-exceeded", "model", False,
        )  # fmt: skip
        view = await pool.control.decision(hop.mint_decision_id)
        assert view.model == "gpt-4o-long"
        assert view.retry_of_mint_decision_id == first.mint_decision_id
        assert view.authorised_by_request_id == row["request_id"]
        # not a health failure: the primary still serves gpt-4o to the next dispatch
        accounts = {a.id: a for a in (await pool.control.accounts()).accounts}
        assert accounts["primary"].health == "healthy"
        await no_live_lease(pool)


async def test_the_same_model_cannot_hop_on_a_context_length_row(
    tmp_path: Path, stores_env: StoresEnv, http: httpx.AsyncClient
) -> None:
    async with two_upstream_pool(tmp_path, stores_env, ENV, accounts_extra=LONG_CONTEXT) as pool:
        pool.primary_script.reply = Reply.json_error(400, TOO_LONG["openai"])
        first = await pool.control.mint(TENANT, "d-1", "gpt-4o")
        assert first.key is not None
        failed = await http.post(
            f"{pool.url}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": []},
            headers={"authorization": f"Bearer {first.key}"},
        )
        assert failed.status_code == 400
        assert failed.headers["x-leasegate-context-fallback"] == "gpt-4o-long"
        await pool.gateway.evidence_for(first.mint_decision_id)
        await pool.control.revoke(first.key_id)
        with pytest.raises(Rejected) as refused:
            await pool.control.mint(
                TENANT, "d-1", "gpt-4o", retry_of_mint_decision_id=first.mint_decision_id
            )
        assert refused.value.code == "fallback-context-length-exceeded"
        with pytest.raises(Rejected) as other:
            await pool.control.mint(
                TENANT, "d-1", "solo", retry_of_mint_decision_id=first.mint_decision_id
            )
        assert other.value.code == "fallback-lineage-mismatch"  # only the declared fallback
