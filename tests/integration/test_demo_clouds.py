"""The demo upstream answers the cloud kinds' paths as the clouds do: Bedrock's InvokeModel
with Anthropic's message and InvokeModelWithResponseStream with an AWS event stream (read
here by the proxy's own decoder), AWS's errors with `x-amzn-ErrorType`; Vertex AI's Claude
(`rawPredict`, `streamRawPredict`) and Gemini (`generateContent`, `streamGenerateContent`)
paths with Anthropic's and Gemini's answers, Google's error shape. Any signature is accepted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from leasegate.demo.upstream import MockUpstream, Reply
from leasegate.providers import kind_named
from leasegate.providers.bedrock import EVENT_STREAM
from leasegate.upstream.sse import StreamScanner
from tests.fixtures.servers import local_client

PROFILE = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
BEDROCK = "/model/eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0"
VERTEX = "/v1/projects/demo-project/locations/europe-west1/publishers"
SIGNED = {"authorization": "AWS4-HMAC-SHA256 Credential=AKIADEMO/x, Signature=nonsense"}


@pytest.fixture
async def demo() -> AsyncIterator[tuple[httpx.AsyncClient, MockUpstream]]:
    async with local_client(timeout=5) as http, MockUpstream(chunks=4) as upstream:
        yield http, upstream


def scanned(wire: str, body: bytes) -> StreamScanner:
    scanner = StreamScanner(wire)
    scanner.feed(body)
    scanner.close()
    return scanner


async def test_bedrock_invoke_answers_a_message_naming_the_paths_model(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "messages": []}
    response = await http.post(upstream.url + BEDROCK + "/invoke", json=body, headers=SIGNED)
    assert response.status_code == 200
    assert response.json()["model"] == PROFILE
    assert response.json()["usage"]["input_tokens"] == 12


async def test_bedrock_streams_an_aws_event_stream_the_proxy_decodes(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "messages": []}
    url = upstream.url + BEDROCK + "/invoke-with-response-stream"
    response = await http.post(url, json=body, headers=SIGNED)
    assert response.status_code == 200
    assert response.headers["content-type"] == EVENT_STREAM
    assert b"event: " not in response.content  # framed, not SSE
    decoder = kind_named("bedrock").stream_decoder()
    assert decoder is not None
    sse = decoder.feed(response.content)
    scanner = scanned("anthropic", sse)
    assert (scanner.completed, scanner.error, scanner.malformed) == (True, None, 0)
    assert (scanner.usage.input_tokens, scanner.usage.output_tokens) == (12, 4)
    assert PROFILE.encode() in sse


async def test_bedrock_fails_mid_stream_with_its_own_exception(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    upstream.script = lambda request: Reply(error_after=2)
    url = upstream.url + BEDROCK + "/invoke-with-response-stream"
    response = await http.post(url, json={"messages": []})
    decoder = kind_named("bedrock").stream_decoder()
    assert decoder is not None
    scanner = scanned("anthropic", decoder.feed(response.content))
    assert scanner.error is not None
    assert scanner.error.code == "ModelStreamErrorException"
    assert not scanner.completed


async def test_bedrock_errors_name_their_aws_type(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    upstream.script = lambda request: Reply(status=429)
    response = await http.post(upstream.url + BEDROCK + "/invoke", json={"messages": []})
    assert response.status_code == 429
    assert response.headers["x-amzn-errortype"].startswith("ThrottlingException:")
    assert set(response.json()) == {"message"}


@pytest.mark.parametrize("method", ["rawPredict", "streamRawPredict"])
async def test_vertex_claude_answers_as_anthropic(
    demo: tuple[httpx.AsyncClient, MockUpstream], method: str
) -> None:
    http, upstream = demo
    stream = method.startswith("stream")
    body = {"anthropic_version": "vertex-2023-10-16", "messages": [], "stream": stream}
    url = f"{upstream.url}{VERTEX}/anthropic/models/claude-sonnet-4-5@20250929:{method}"
    response = await http.post(url, json=body, headers={"authorization": "Bearer ya29.any"})
    assert response.status_code == 200
    if stream:
        assert response.headers["content-type"] == "text/event-stream"
        scanner = scanned("anthropic", response.content)
        assert (scanner.completed, scanner.usage.input_tokens) == (True, 12)
    else:
        assert response.json()["model"] == "claude-sonnet-4-5@20250929"
        assert response.json()["usage"]["input_tokens"] == 12


async def test_vertex_claude_streams_when_only_the_path_asks(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    url = f"{upstream.url}{VERTEX}/anthropic/models/claude-haiku-4-5:streamRawPredict"
    response = await http.post(url, json={"messages": []})
    assert response.headers["content-type"] == "text/event-stream"
    assert scanned("anthropic", response.content).completed


async def test_vertex_errors_are_googles(demo: tuple[httpx.AsyncClient, MockUpstream]) -> None:
    http, upstream = demo
    upstream.script = lambda request: Reply(status=429)
    url = f"{upstream.url}{VERTEX}/anthropic/models/claude-haiku-4-5:rawPredict"
    response = await http.post(url, json={"messages": []})
    assert response.status_code == 429
    assert response.json()["error"]["status"] == "RESOURCE_EXHAUSTED"


async def test_vertex_gemini_answers_and_streams_as_gemini(
    demo: tuple[httpx.AsyncClient, MockUpstream],
) -> None:
    http, upstream = demo
    base = f"{upstream.url}{VERTEX}/google/models/gemini-2.5-flash"
    plain = await http.post(base + ":generateContent", json={"contents": []})
    streamed = await http.post(base + ":streamGenerateContent?alt=sse", json={"contents": []})
    assert plain.status_code == streamed.status_code == 200
    assert plain.json()["modelVersion"] == "gemini-2.5-flash"
    assert plain.json()["usageMetadata"]["promptTokenCount"] == 12
    scanner = scanned("gemini", streamed.content)
    assert (scanner.completed, scanner.usage.input_tokens) == (True, 12)
