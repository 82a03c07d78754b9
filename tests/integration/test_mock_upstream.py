"""The mock upstream answers like a provider by default and does what a test's script says."""

from __future__ import annotations

import asyncio
import math
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from leasegate.upstream.sse import StreamScanner, usage_from_body
from tests.fixtures.servers import local_client

ENDPOINTS: list[tuple[str, str]] = [
    ("/v1/chat/completions", "openai"),
    ("/v1/completions", "openai"),
    ("/v1/responses", "responses"),
    ("/v1/messages", "anthropic"),
]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with local_client(timeout=5) as http:
        yield http


def scanned(dialect: str, body: bytes) -> StreamScanner:
    scanner = StreamScanner(dialect)
    scanner.feed(body)
    scanner.close()
    return scanner


@pytest.mark.parametrize(("path", "dialect"), ENDPOINTS)
async def test_streams_echo_the_model_and_carry_usage(
    client: httpx.AsyncClient, path: str, dialect: str
) -> None:
    # OpenAI's chat and completions streams report usage only when asked; other wires ignore it
    body = {"model": "m-7", "stream": True, "stream_options": {"include_usage": True}}
    async with MockUpstream() as upstream:
        response = await client.post(upstream.url + path, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert b'"model":"m-7"' in response.content
    scanner = scanned(dialect, response.content)
    assert scanner.completed
    assert scanner.error is None
    assert scanner.malformed == 0
    assert scanner.usage.input_tokens == 12
    assert scanner.usage.output_tokens == 20
    assert scanner.events >= 22


@pytest.mark.parametrize(("path", "dialect"), [*ENDPOINTS, ("/v1/embeddings", "openai")])
async def test_json_bodies_echo_the_model_and_carry_usage(
    client: httpx.AsyncClient, path: str, dialect: str
) -> None:
    async with MockUpstream() as upstream:
        response = await client.post(upstream.url + path, json={"model": "m-7"})
    assert response.status_code == 200
    assert response.json()["model"] == "m-7"
    assert usage_from_body(dialect, response.content).input_tokens == 12


async def test_requests_are_recorded(client: httpx.AsyncClient) -> None:
    async with MockUpstream() as upstream:
        await client.post(
            upstream.url + "/v1/messages?beta=true",
            json={"model": "claude", "stream": False},
            headers={"x-api-key": "k"},
        )
    (request,) = upstream.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "k"
    assert request.json == {"model": "claude", "stream": False}
    assert not request.stream
    assert upstream.count == 1


async def test_scripted_error_status_headers_and_body(client: httpx.AsyncClient) -> None:
    def script(request: MockRequest) -> Reply:
        return Reply.json_error(
            429,
            {"error": {"type": "requests", "code": "rate_limit_exceeded"}},
            {"retry-after": "3"},
        )

    async with MockUpstream(script) as upstream:
        response = await client.post(upstream.url + "/v1/chat/completions", json={"model": "m"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


async def test_an_error_status_without_a_body_gets_a_provider_shaped_one(
    client: httpx.AsyncClient,
) -> None:
    async with MockUpstream(lambda request: Reply(status=503)) as upstream:
        response = await client.post(upstream.url + "/v1/chat/completions", json={"model": "m"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "http_503"


async def test_error_event_after_n_chunks(client: httpx.AsyncClient) -> None:
    async with MockUpstream(lambda request: Reply(error_after=4)) as upstream:
        response = await client.post(
            upstream.url + "/v1/chat/completions", json={"model": "m", "stream": True}
        )
    scanner = scanned("openai", response.content)
    assert scanner.events == 5
    assert scanner.error is not None
    assert scanner.error.code == "502"
    assert b"[DONE]" not in response.content


async def test_custom_chunks(client: httpx.AsyncClient) -> None:
    chunks = [b"data: {}\n\n", b"data: [DONE]\n\n"]
    async with MockUpstream(lambda request: Reply(chunks=chunks)) as upstream:
        response = await client.post(upstream.url + "/v1/chat/completions", json={"model": "m"})
    assert response.content == b"".join(chunks)


async def test_cut_mid_stream(client: httpx.AsyncClient) -> None:
    async with MockUpstream(lambda request: Reply(cut_after=2)) as upstream:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(upstream.url + "/v1/messages", json={"model": "m", "stream": True})


async def test_reset_before_headers(client: httpx.AsyncClient) -> None:
    async with MockUpstream(lambda request: Reply(reset=True)) as upstream:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await client.post(upstream.url + "/v1/messages", json={"model": "m"})


async def test_hang_before_headers_until_stopped(client: httpx.AsyncClient) -> None:
    upstream = MockUpstream(lambda request: Reply(headers_delay_s=math.inf))
    await upstream.start()
    with pytest.raises(httpx.ReadTimeout):
        await client.post(upstream.url + "/v1/messages", json={"model": "m"}, timeout=0.2)
    assert upstream.in_flight == 1
    started = time.monotonic()
    await upstream.stop()
    assert time.monotonic() - started < 1
    assert upstream.in_flight == 0


async def test_per_chunk_delays_spread_the_stream(client: httpx.AsyncClient) -> None:
    reply = Reply(chunks=[b"data: {}\n\n"] * 3, chunk_delays=[0.0, 0.1, 0.1])
    async with MockUpstream(lambda request: reply) as upstream:
        started = time.monotonic()
        await client.post(upstream.url + "/v1/chat/completions", json={"model": "m"})
    assert time.monotonic() - started >= 0.2


async def test_in_flight_is_counted_under_concurrency(client: httpx.AsyncClient) -> None:
    async with MockUpstream(lambda request: Reply(headers_delay_s=0.1)) as upstream:
        url = upstream.url + "/v1/embeddings"
        responses = await asyncio.gather(*(client.post(url, json={"model": "e"}) for _ in range(5)))
    assert [r.status_code for r in responses] == [200] * 5
    assert upstream.max_in_flight == 5
    assert upstream.in_flight == 0
    assert upstream.count == 5


async def test_keep_alive_reuses_one_connection(client: httpx.AsyncClient) -> None:
    async with MockUpstream() as upstream:
        for _ in range(10):
            response = await client.post(
                upstream.url + "/v1/chat/completions", json={"model": "m", "stream": True}
            )
            assert response.status_code == 200
    assert upstream.connections == 1


async def test_bad_requests(client: httpx.AsyncClient) -> None:
    async with MockUpstream() as upstream:
        unknown = await client.post(upstream.url + "/v1/nope", json={"model": "m"})
        wrong_method = await client.get(upstream.url + "/v1/chat/completions")
        not_json = await client.post(upstream.url + "/v1/chat/completions", content=b"{oops")
    assert (unknown.status_code, wrong_method.status_code, not_json.status_code) == (404, 405, 400)


async def test_the_recorded_list_is_bounded(client: httpx.AsyncClient) -> None:
    async with MockUpstream(max_recorded=3) as upstream:
        for i in range(5):
            await client.post(upstream.url + "/v1/embeddings", json={"model": f"e{i}"})
    assert [r.json["model"] for r in upstream.requests if r.json] == ["e2", "e3", "e4"]
    assert upstream.count == 5


@pytest.mark.slow
def test_runs_as_a_module() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "leasegate.demo.upstream", "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)  # noqa: S603 (our own module)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                response = httpx.post(
                    f"http://127.0.0.1:{port}/v1/embeddings", json={"model": "e"}, timeout=1
                )
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert response.json()["model"] == "e"
    finally:
        process.terminate()
        assert process.wait(timeout=5) == 0
        assert process.stderr is not None
        process.stderr.close()
