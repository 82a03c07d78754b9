"""The per-account clients against a real mock upstream: credentials, headers, streaming, pools."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from leasegate.accounts import Account, Provider, Registry
from leasegate.config import Settings
from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from leasegate.providers import ENDPOINTS
from leasegate.upstream.clients import UnknownAccountError, UpstreamClients, UpstreamResponse
from leasegate.upstream.deadlines import BodyReader, Deadlines
from leasegate.upstream.errors import (
    BodyFailed,
    HeadersTimeout,
    PoolExhausted,
    UpstreamError,
)
from leasegate.upstream.failures import send_failure, stream_failure, stream_observation
from leasegate.upstream.sse import StreamScanner

SECRET = "sk-live-THE-REAL-CREDENTIAL"
ENDPOINT = {endpoint.path: endpoint for endpoint in ENDPOINTS}
CALLER = {
    "authorization": "Bearer lg_key_callers-virtual-key",
    "x-api-key": "lg_key_callers-virtual-key",
    "cookie": "session=abc",
    "host": "proxy.internal",
    "content-length": "999",
    "openai-organization": "org-other",
    "user-agent": "OpenAI/Python 1.99",
    "content-type": "application/json",
    "openai-beta": "assistants=v2",
}
CHAT = b'{"model": "gpt-4o", "messages": []}'
STREAM = b'{"model": "gpt-4o", "stream": true}'
STREAM_WITH_USAGE = (
    b'{"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true}}'
)


def account(account_id: str, url: str, provider: Provider = "openai", **extra: object) -> Account:
    return Account(
        id=account_id,
        provider=provider,
        base_url=url,
        credential_env="LEASEGATE_CRED_" + account_id.upper().replace("-", "_"),
        models={"gpt-4o": "gpt-4o"},
        configured=True,
        **extra,  # type: ignore[arg-type]
    )


def clients_for(*accounts: Account, **settings: object) -> UpstreamClients:
    return UpstreamClients(
        Registry(accounts),
        {a.id: SecretStr(SECRET) for a in accounts},
        Settings.model_validate(settings),
    )


@pytest.fixture
async def upstream() -> AsyncIterator[MockUpstream]:
    async with MockUpstream() as mock:
        yield mock


async def read_all(response: UpstreamResponse) -> bytes:
    reader = BodyReader(response.content, response_deadlines)
    parts = []
    try:
        while (piece := await reader.next()) is not None:
            parts.append(piece)
    finally:
        reader.close()
    return b"".join(parts)


async def call(
    clients: UpstreamClients, acct: Account, path: str, body: bytes
) -> tuple[int, bytes]:
    response = await clients.send(clients.build_request(acct, ENDPOINT[path], body, CALLER))
    try:
        return response.status, await read_all(response)
    finally:
        response.close()


async def relay(response: UpstreamResponse, scanner: StreamScanner) -> list[float]:
    """Feed the body to the scanner as it arrives; the arrival times of its pieces."""
    reader = BodyReader(response.content, response_deadlines)
    arrivals = []
    try:
        while (piece := await reader.next()) is not None:
            arrivals.append(time.monotonic())
            scanner.feed(piece)
    finally:
        reader.close()
    return arrivals


response_deadlines = Deadlines(headers_s=30.0, first_token_s=None, idle_s=60.0)


async def test_credential_sent_and_callers_own_auth_never_forwarded(
    upstream: MockUpstream,
) -> None:
    acct = account("openai-main", upstream.url)
    clients = clients_for(acct)
    try:
        status, body = await call(clients, acct, "/v1/chat/completions", CHAT)
    finally:
        await clients.aclose()
    assert status == 200
    assert json.loads(body)["model"] == "gpt-4o"
    headers = upstream.requests[-1].headers
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert "x-api-key" not in headers
    assert "cookie" not in headers
    assert "openai-organization" not in headers
    assert headers["host"] != "proxy.internal"
    assert headers["content-length"] == str(len(CHAT))
    assert headers["user-agent"] == "OpenAI/Python 1.99"
    assert headers["openai-beta"] == "assistants=v2"
    assert headers["accept-encoding"] == "identity"
    assert upstream.requests[-1].body == CHAT


async def test_anthropic_gets_x_api_key_and_a_default_version(upstream: MockUpstream) -> None:
    acct = account("claude", upstream.url, "anthropic")
    clients = clients_for(acct)
    try:
        await call(clients, acct, "/v1/messages", CHAT)
        pinned = clients.build_request(
            acct, ENDPOINT["/v1/messages"], CHAT, [("Anthropic-Version", "2024-01-01")]
        )
        (await clients.send(pinned)).close()
    finally:
        await clients.aclose()
    defaulted, kept = upstream.requests[-2].headers, upstream.requests[-1].headers
    assert defaulted["x-api-key"] == SECRET
    assert "authorization" not in defaulted
    assert defaulted["anthropic-version"] == "2023-06-01"
    assert kept["anthropic-version"] == "2024-01-01"


async def test_base_url_path_prefix_is_kept(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(body=b"{}")
    acct = account("openrouter", upstream.url + "/api", "openrouter")
    clients = clients_for(acct)
    try:
        await call(clients, acct, "/v1/chat/completions", CHAT)
    finally:
        await clients.aclose()
    assert upstream.requests[-1].path == "/api/v1/chat/completions"


async def test_the_credential_is_not_in_reprs_or_errors(upstream: MockUpstream) -> None:
    acct = account("openai-main", upstream.url)
    clients = clients_for(acct)
    request = clients.build_request(acct, ENDPOINT["/v1/chat/completions"], CHAT, CALLER)
    await clients.aclose()
    assert SECRET not in repr(clients)
    assert SECRET not in repr(request)
    with pytest.raises(UnknownAccountError) as unknown:
        clients.pool("nope")
    assert SECRET not in str(unknown.value)
    with pytest.raises(ValueError, match="openai-main") as bad:
        UpstreamClients(Registry((acct,)), {acct.id: SecretStr(SECRET + "\n")}, Settings())
    assert SECRET not in str(bad.value)


async def test_a_stream_arrives_chunk_by_chunk(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(chunk_delay_s=0.05)
    upstream.chunks = 6
    acct = account("openai-main", upstream.url)
    clients = clients_for(acct)
    scanner = StreamScanner("openai")
    try:
        request = clients.build_request(
            acct, ENDPOINT["/v1/chat/completions"], STREAM_WITH_USAGE, CALLER
        )
        response = await clients.send(request)
        arrivals = await relay(response, scanner)
        response.close()
    finally:
        await clients.aclose()
    scanner.close()
    # 6 deltas, the finish chunk, the usage chunk (asked for), [DONE]: 8 pauses of 50 ms.
    assert len(arrivals) >= 9
    assert arrivals[-1] - arrivals[0] >= 0.3, "the first chunk came before the last was sent"
    assert stream_observation(scanner, response.status).kind == "response"
    assert scanner.usage.output_tokens == 6


async def test_one_accounts_saturated_pool_does_not_slow_another(upstream: MockUpstream) -> None:
    arrived = asyncio.Event()

    def hang_for_slow(request: MockRequest) -> Reply | None:
        if request.json is None or request.json.get("model") != "slow":
            return None
        arrived.set()
        return Reply(headers_delay_s=math.inf)

    upstream.script = hang_for_slow
    a = account("acct-a", upstream.url, max_connections=1)
    b = account("acct-b", upstream.url, max_connections=1)
    clients = clients_for(a, b, upstream_pool_timeout_s=0.5)
    path = "/v1/chat/completions"
    hanging = asyncio.create_task(call(clients, a, path, b'{"model": "slow"}'))
    try:
        await asyncio.wait_for(arrived.wait(), 2)
        started = time.monotonic()
        assert (await call(clients, b, path, CHAT))[0] == 200
        assert time.monotonic() - started < 0.4
        started = time.monotonic()
        with pytest.raises(PoolExhausted) as exhausted:
            await call(clients, a, path, CHAT)
        assert 0.45 <= time.monotonic() - started < 3
        failure = send_failure(exhausted.value, a.id)
        assert failure.error.code == "upstream-pool-exhausted"
        assert failure.observation.kind == "refused"
        assert upstream.count == 2, "the refused request never reached the upstream"
    finally:
        hanging.cancel()
        await asyncio.gather(hanging, return_exceptions=True)
        await clients.aclose()


async def test_a_cancelled_send_gives_its_pool_slot_back(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(headers_delay_s=math.inf)
    acct = account("openai-main", upstream.url, max_connections=1)
    clients = clients_for(acct, upstream_pool_timeout_s=0.5)
    try:
        hanging = asyncio.create_task(call(clients, acct, "/v1/chat/completions", CHAT))
        await asyncio.sleep(0.1)
        hanging.cancel()
        await asyncio.gather(hanging, return_exceptions=True)
        upstream.script = None
        assert (await call(clients, acct, "/v1/chat/completions", CHAT))[0] == 200
    finally:
        await clients.aclose()


async def test_slow_headers_are_a_timeout(upstream: MockUpstream) -> None:
    upstream.script = lambda request: (
        Reply(headers_delay_s=1.0) if request.path == "/v1/chat/completions" else None
    )
    acct = account("openai-main", upstream.url, headers_timeout_s=0.1)
    clients = clients_for(acct)
    try:
        await call(clients, acct, "/v1/embeddings", CHAT)  # a pooled connection, then reuse it
        with pytest.raises(HeadersTimeout) as timed_out:
            await call(clients, acct, "/v1/chat/completions", CHAT)
    finally:
        await clients.aclose()
    assert send_failure(timed_out.value, acct.id).observation.kind == "timeout"


async def test_waiting_for_the_pool_does_not_count_against_the_headers_timeout(
    upstream: MockUpstream,
) -> None:
    # One connection; the first request holds it for ~1 s (its headers come at once, its body
    # slowly). The second waits that long for the pool, more than its 0.3 s headers timeout,
    # then gets its headers at once: an answer, not a timeout.
    upstream.script = lambda request: Reply(
        chunks=[b"data: {}\n\n"] * 3, chunk_delay_s=0.5 if request.stream else 0.0
    )
    acct = account("openai-main", upstream.url, max_connections=1, headers_timeout_s=0.3)
    clients = clients_for(acct, upstream_pool_timeout_s=10)
    path = "/v1/chat/completions"
    try:
        holder = await clients.send(clients.build_request(acct, ENDPOINT[path], STREAM, CALLER))
        waiter = asyncio.create_task(call(clients, acct, path, CHAT))
        await read_all(holder)
        holder.close()
        assert (await waiter)[0] == 200
    finally:
        await clients.aclose()


async def test_a_stream_may_pause_longer_than_the_headers_timeout(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(chunks=[b"data: {}\n\n"] * 2, chunk_delay_s=0.6)
    acct = account("openai-main", upstream.url, headers_timeout_s=0.2)
    clients = clients_for(acct)
    try:
        _, body = await call(clients, acct, "/v1/chat/completions", STREAM)
    finally:
        await clients.aclose()
    assert body == b"data: {}\n\n" * 2


async def test_nothing_listening_is_a_connect_error_a_reset_after_sending_is_dropped(
    upstream: MockUpstream,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    upstream.script = lambda request: Reply(reset=True)
    refused = account("refused", f"http://127.0.0.1:{closed_port}")
    reset = account("reset", upstream.url)
    clients = clients_for(refused, reset)
    try:
        for acct, kind in ((refused, "connect-error"), (reset, "dropped")):
            with pytest.raises(UpstreamError) as failed:
                await call(clients, acct, "/v1/chat/completions", CHAT)
            assert send_failure(failed.value, acct.id).observation.kind == kind
    finally:
        await clients.aclose()


async def test_a_stream_cut_mid_answer_is_truncated(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(cut_after=3)
    acct = account("openai-main", upstream.url)
    clients = clients_for(acct)
    scanner = StreamScanner("openai")
    try:
        request = clients.build_request(acct, ENDPOINT["/v1/chat/completions"], STREAM, CALLER)
        response = await clients.send(request)
        with pytest.raises(BodyFailed) as cut:
            await relay(response, scanner)
        response.close()
    finally:
        await clients.aclose()
    scanner.close()
    assert scanner.events == 3
    assert not scanner.completed
    assert stream_failure(cut.value, 200).kind == "truncated"


async def test_an_error_event_inside_a_200_stream(upstream: MockUpstream) -> None:
    upstream.script = lambda request: Reply(error_after=2)
    acct = account("claude", upstream.url, "anthropic")
    clients = clients_for(acct)
    scanner = StreamScanner("anthropic")
    try:
        request = clients.build_request(acct, ENDPOINT["/v1/messages"], STREAM, CALLER)
        response = await clients.send(request)
        await relay(response, scanner)
        response.close()
    finally:
        await clients.aclose()
    scanner.close()
    observed = stream_observation(scanner, response.status)
    assert (observed.kind, observed.status, observed.error_type) == (
        "stream-error",
        200,
        "overloaded_error",
    )


async def test_only_configured_accounts_get_a_pool(upstream: MockUpstream) -> None:
    configured = account("has-cred", upstream.url)
    missing = account("no-cred", upstream.url)
    clients = UpstreamClients(
        Registry((configured, missing)), {configured.id: SecretStr(SECRET)}, Settings()
    )
    try:
        assert clients.pool(configured.id) is clients.pool(configured.id)
        with pytest.raises(UnknownAccountError):
            clients.build_request(missing, ENDPOINT["/v1/chat/completions"], CHAT, [])
    finally:
        await clients.aclose()
