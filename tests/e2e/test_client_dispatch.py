"""`Dispatch` through real HTTP against a two-account pool (tests/fixtures/pool.py): it
completes on the backup whenever the primary's failure qualifies, holds at most one live
lease at any sample, stops at once when the failure does not qualify, never outlives its
deadline, and recovers a lost mint answer by replay and supersede."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.client import Dispatch, DispatchFailed, post_json, stream_events
from leasegate.demo.upstream import Reply
from tests.fixtures.pool import TENANT, Pool, lease_watch, two_upstream_pool
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv

PoolFactory = Callable[..., AbstractAsyncContextManager[Pool]]
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def mode() -> str:
    """Postgres and Redis only: the embedded mode runs the same code on the client's side,
    and tests/e2e/test_hops.py covers the server in both modes."""
    return "production"


@pytest.fixture
def make_pool(tmp_path: Path, stores_env: StoresEnv) -> PoolFactory:
    def pool(
        extra: Mapping[str, str] | None = None,
        control_transport: httpx.AsyncBaseTransport | None = None,
    ) -> AbstractAsyncContextManager[Pool]:
        return two_upstream_pool(tmp_path, stores_env, extra, control_transport)

    return pool


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with local_client(timeout=30) as client:
        yield client


def _dispatch(pool: Pool, dispatch_id: str = "d-1", **options: Any) -> Dispatch[Any]:
    return Dispatch(
        pool.control,
        pool.url,
        tenant=TENANT,
        dispatch_id=dispatch_id,
        model=options.pop("model", "gpt-4o"),
        deadline_s=options.pop("deadline_s", 20.0),
        **options,
    )


async def _no_live_lease(pool: Pool) -> None:
    view = await pool.control.accounts()
    assert sum(a.leases_held for a in view.accounts) == 0  # the run released its lease


@pytest.mark.parametrize(
    ("reply", "stream", "ended", "retried"),
    [
        (Reply(status=429), False, "status 429", 0),  # no Retry-After: no same-lease retry
        (Reply(status=503), False, "status 503", 1),  # transient: once more, then the hop
        (Reply(error_after=2), True, "in-stream error", 0),
    ],
    ids=["429", "503", "in-stream-error"],
)
async def test_completes_on_the_second_account_when_the_first_fails(
    make_pool: PoolFactory,
    http: httpx.AsyncClient,
    reply: Reply,
    stream: bool,
    ended: str,
    retried: int,
) -> None:
    async with make_pool() as pool:
        pool.primary_script.reply = reply

        async def call(key: str, proxy_url: str) -> Any:
            if stream:
                return await stream_events(http, proxy_url, key, "/v1/chat/completions", CHAT)
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        async with lease_watch(pool) as leases:
            result = await _dispatch(pool).run(call)
        assert leases
        assert max(leases) <= 1  # never two live leases of the dispatch
        first, hop = result.chain
        assert (first.account_id, first.fallback_position, first.hop) == ("primary", 0, 0)
        assert first.ended is not None
        assert first.ended.startswith(ended)
        assert (hop.account_id, hop.fallback_position, hop.hop, hop.kind) == (
            "backup",
            1,
            1,
            "retry",
        )
        assert hop.ended is None
        assert result.decision == hop
        if stream:
            assert result.answer[0]["model"] == "gpt-4o-b"
        else:
            assert result.answer["model"] == "gpt-4o-b"
        assert len(first.retried) == retried
        assert (pool.primary.count, pool.backup.count) == (1 + retried, 1)
        view = await pool.control.decision(hop.mint_decision_id)
        assert view.retry_of_mint_decision_id == first.mint_decision_id
        assert view.authorised_by_request_id is not None
        await _no_live_lease(pool)


async def test_a_400_stops_at_once_without_a_hop(
    make_pool: PoolFactory, http: httpx.AsyncClient
) -> None:
    async with make_pool() as pool:
        pool.primary_script.reply = Reply(status=400)

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        with pytest.raises(DispatchFailed) as failed:
            await _dispatch(pool).run(call)
        assert failed.value.reason == "call-failed"
        assert failed.value.refusal is None  # no hop was even asked for
        (only,) = failed.value.chain
        assert (only.account_id, only.ended) == ("primary", "status 400 http_400")
        assert (pool.primary.count, pool.backup.count) == (1, 0)
        decisions = await pool.control.decisions(TENANT, "d-1")
        assert [d.kind for d in decisions] == ["fresh"]
        await _no_live_lease(pool)


@pytest.mark.parametrize(
    ("hops", "code"), [("1", "fallback-budget-exhausted"), ("2", "no-eligible-account")]
)
async def test_a_pool_whose_accounts_all_fail_ends_with_the_last_refusal(
    make_pool: PoolFactory, http: httpx.AsyncClient, hops: str, code: str
) -> None:
    async with make_pool({"LEASEGATE_MAX_FALLBACK_HOPS": hops}) as pool:
        pool.primary_script.reply = Reply(status=503)
        pool.backup_script.reply = Reply(status=502)

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        deadline_s = 8.0
        started = time.monotonic()
        with pytest.raises(DispatchFailed) as failed:
            await _dispatch(pool, deadline_s=deadline_s).run(call)
        assert time.monotonic() - started < deadline_s
        assert failed.value.reason == "refused"
        assert failed.value.code == code
        assert failed.value.refusal is not None
        assert failed.value.refusal.mint_decision_id is not None
        assert [link.account_id for link in failed.value.chain] == ["primary", "backup"]
        await _no_live_lease(pool)


async def test_a_hanging_upstream_ends_at_the_deadline(
    make_pool: PoolFactory, http: httpx.AsyncClient
) -> None:
    async with make_pool() as pool:
        pool.primary_script.reply = Reply(headers_delay_s=float("inf"))

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        started = time.monotonic()
        with pytest.raises(DispatchFailed) as failed:
            await _dispatch(pool, deadline_s=1.5).run(call)
        assert time.monotonic() - started < 10  # bounded by the deadline, not the upstream
        assert failed.value.reason == "deadline"
        assert failed.value.chain[0].ended == "deadline"
        await _no_live_lease(pool)
        await pool.primary.stop()  # lets the proxy's hanging upstream request end


async def test_waits_out_a_cooldown_within_the_deadline(
    make_pool: PoolFactory, http: httpx.AsyncClient
) -> None:
    # 2 s: the first dispatch's held hop (its evidence row is buffered) may itself take 1 s
    cooling = {
        "LEASEGATE_FAILURE_THRESHOLD": "1",
        "LEASEGATE_BASE_COOLDOWN_S": "2",
        "LEASEGATE_COOLDOWN_JITTER": "0",
    }
    async with make_pool(cooling) as pool:
        pool.primary_script.reply = Reply(status=429)

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            return await post_json(
                http, proxy_url, key, "/v1/chat/completions", {**CHAT, "model": "solo"}
            )

        # "solo" has one account: the failed dispatch cannot hop and leaves it cooling
        with pytest.raises(DispatchFailed) as failed:
            await _dispatch(pool, "d-1", model="solo").run(call)
        assert failed.value.code == "no-eligible-account"
        pool.primary_script.reply = None

        # too short a deadline for the cooldown: ends at once with the held refusal
        with pytest.raises(DispatchFailed) as short:
            await _dispatch(pool, "d-2", model="solo", deadline_s=0.5).run(call)
        assert (short.value.reason, short.value.code) == ("deadline", "no-eligible-account")
        assert short.value.refusal is not None
        assert short.value.refusal.retry_after_s is not None

        result = await _dispatch(pool, "d-3", model="solo", deadline_s=15).run(call)
        assert result.answer["model"] == "solo-a"
        assert [link.account_id for link in result.chain] == ["primary"]


class DropFirstMintAnswer(httpx.AsyncBaseTransport):
    """Lets the first mint reach the control plane, then loses its answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.dropped = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.dropped == 0 and request.method == "POST" and request.url.path.endswith("/keys"):
            await response.aread()
            await response.aclose()
            self.dropped += 1
            raise httpx.ReadError("connection lost after the request was processed")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_lost_mint_answer_is_recovered_by_supersede(
    make_pool: PoolFactory, http: httpx.AsyncClient
) -> None:
    transport = DropFirstMintAnswer()
    async with make_pool(control_transport=transport) as pool:

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        async with lease_watch(pool) as leases:
            result = await _dispatch(pool).run(call)
        assert transport.dropped == 1
        assert max(leases) <= 1
        lost, recovered = result.chain
        assert lost.ended == "response-lost"
        assert (recovered.kind, recovered.account_id, recovered.hop) == ("supersede", "primary", 0)
        assert result.answer["model"] == "gpt-4o-a"
        assert (await pool.control.get_key(lost.key_id)).state == "revoked"
        view = await pool.control.decision(recovered.mint_decision_id)
        assert view.supersedes_mint_decision_id == lost.mint_decision_id
        assert pool.primary.count == 1  # the lost key never reached the proxy
        await _no_live_lease(pool)


async def test_renews_a_key_that_nears_expiry_before_calling(
    make_pool: PoolFactory, http: httpx.AsyncClient
) -> None:
    async with make_pool() as pool:
        seen: list[str] = []

        async def call(key: str, proxy_url: str) -> dict[str, Any]:
            seen.append(key)
            return await post_json(http, proxy_url, key, "/v1/chat/completions", CHAT)

        # a 60 s key "nears expiry" when the margin is larger than its whole life
        result = await _dispatch(pool, ttl_s=60, renew_within_s=30.0).run(call)
        assert [link.kind for link in result.chain] == ["fresh"]
        renewing = await _dispatch(pool, "d-2", ttl_s=60, renew_within_s=120.0).run(call)
        minted, renewal = renewing.chain
        assert (minted.ended, renewal.kind) == ("renewed", "renewal")
        assert renewal.account_id == minted.account_id
        assert (await pool.control.get_key(minted.key_id)).state == "revoked"
        assert len(seen) == 2
