"""`make run`'s cloud accounts work with no cloud: the bundled demo accounts file, as
`leasegate dev --demo` writes it, through the gateway in this process against the demo
upstream. A mint restricted to one provider kind lands on that cloud's account, and the
official `anthropic` SDK (Bedrock, Vertex AI's Claude) or a plain Gemini client (Vertex AI's
Gemini) gets its answer, plain and streamed, with the static placeholder credential the demo
sets (`LEASEGATE_CRED_DEMO`); the upstream saw each cloud's own path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import pytest

from leasegate.cli.demo import DEMO_CREDENTIAL, demo_defaults
from leasegate.config import load_config
from leasegate.demo.upstream import MockUpstream
from leasegate.upstream.sse import StreamScanner
from tests.fixtures.gateways import CONTROL_TOKEN, Gateway, in_process_gateway

CLAUDE = [
    ("bedrock", "/model/eu.anthropic.claude-demo-v1%3A0/invoke"),
    (
        "vertex",
        "/v1/projects/demo-project/locations/europe-west1/publishers/anthropic/models/"
        "claude-demo@20260101:rawPredict",
    ),
]
STREAMED = {
    "/invoke": "/invoke-with-response-stream",
    ":rawPredict": ":streamRawPredict",
}


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[Gateway, MockUpstream]]:
    async with MockUpstream() as upstream:
        env = {
            **demo_defaults(upstream.port, tmp_path),
            "LEASEGATE_CONTROL_TOKEN": CONTROL_TOKEN,
            "LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S": "0.01",
        }
        async with in_process_gateway(env, [upstream]) as gateway:
            yield gateway, upstream


async def test_the_demo_starts_with_every_cloud_account(
    demo: tuple[Gateway, MockUpstream],
) -> None:
    gateway, _ = demo
    accounts = load_config(gateway.env).registry.accounts
    providers = {a.id: a.provider for a in accounts if a.configured}
    assert providers == {
        "demo-openai": "openai-compatible",
        "demo-anthropic": "anthropic",
        "demo-bedrock": "bedrock",
        "demo-vertex": "vertex",
        "demo-vertex-gemini": "vertex-gemini",
    }


@pytest.mark.parametrize(("provider", "path"), CLAUDE)
async def test_claude_on_a_cloud_answers_the_anthropic_sdk(
    demo: tuple[Gateway, MockUpstream], provider: str, path: str
) -> None:
    gateway, upstream = demo
    minted = await gateway.minted(
        model="claude-demo", dispatch_id=f"d-{provider}", allowed_providers=[provider]
    )
    assert minted["account_id"] == f"demo-{provider}"
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=minted["key"], max_retries=0)
    async with client:
        message = await client.messages.create(
            model="claude-demo", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
        async with client.messages.stream(
            model="claude-demo", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            final = await stream.get_final_message()
    assert message.content[0].type == "text"
    assert message.content[0].text
    assert message.usage.input_tokens == 12
    assert text
    assert (final.stop_reason, final.usage.output_tokens) == ("end_turn", 20)
    streamed = path
    for plain, stream_suffix in STREAMED.items():
        streamed = streamed.replace(plain, stream_suffix)
    assert [r.path for r in upstream.requests] == [path, streamed]
    # the demo's placeholder is the cloud's static credential (a Bedrock API key, a fixed
    # Vertex AI token): no cloud chain is asked
    assert {r.headers["authorization"] for r in upstream.requests} == {f"Bearer {DEMO_CREDENTIAL}"}


async def test_gemini_on_vertex_answers_plain_and_streamed(
    demo: tuple[Gateway, MockUpstream],
) -> None:
    gateway, upstream = demo
    minted = await gateway.minted(model="gemini-demo", dispatch_id="d-gemini")
    assert minted["account_id"] == "demo-vertex-gemini"
    headers = {"x-goog-api-key": minted["key"]}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    base = f"{gateway.url}/v1beta/models/gemini-demo"
    plain = await gateway.client.post(base + ":generateContent", json=body, headers=headers)
    streamed = await gateway.client.post(
        base + ":streamGenerateContent?alt=sse", json=body, headers=headers
    )
    assert plain.status_code == streamed.status_code == 200
    assert plain.json()["usageMetadata"]["promptTokenCount"] == 12
    scanner = StreamScanner("gemini")
    scanner.feed(streamed.content)
    scanner.close()
    assert (scanner.completed, scanner.error, scanner.usage.input_tokens) == (True, None, 12)
    prefix = "/v1/projects/demo-project/locations/europe-west1/publishers/google/models/"
    assert [r.path for r in upstream.requests] == [
        prefix + "gemini-demo-001:generateContent",
        prefix + "gemini-demo-001:streamGenerateContent",
    ]
