"""One model across clouds: `anthropic`, `bedrock` and `vertex` accounts serve the same
requested model in one ordered pool; for each pair, the first account fails with its own
rate-limit error, the worker hops (on the gateway's evidence) and sends the very same request
with the new key, and each upstream receives that request in its own dialect only: nothing of
one provider's headers or body fields reaches another."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, gateway_env, in_process_gateway
from tests.fixtures.mock_clouds import MockBedrock, MockVertex, mock_bedrock, mock_vertex
from tests.fixtures.scripted import ENV
from tests.fixtures.services import StoresEnv

REGION = "eu-central-1"
SERVED = {
    "anthropic": "claude-sonnet-4-5-20250929",
    "bedrock": "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
}
WORKER_BODY = {
    "model": "claude-fleet",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}
RAW = json.dumps(WORKER_BODY).encode()
ANTHROPIC_ONLY = {"anthropic-version", "anthropic-beta", "x-api-key"}


class Clouds:
    def __init__(self, anthropic: MockUpstream, bedrock: MockBedrock, vertex: MockVertex):
        self.anthropic, self.bedrock, self.vertex = anthropic, bedrock, vertex

    def entry(self, provider: str) -> dict[str, Any]:
        models = {"claude-fleet": SERVED[provider]}
        if provider == "anthropic":
            return {
                "id": "anthropic-main",
                "provider": "anthropic",
                "base_url": self.anthropic.url,
                "credential_env": "LEASEGATE_CRED_ANTHROPIC_MAIN",
                "models": models,
            }
        if provider == "bedrock":
            return {
                "id": "bedrock-eu",
                "provider": "bedrock",
                "base_url": self.bedrock.url,
                "region": REGION,
                "models": models,
            }
        return {
            "id": "vertex-claude",
            "provider": "vertex",
            "base_url": self.vertex.url,
            "project": "fleet-prod-1",
            "location": "global",
            "models": models,
        }

    def fail_next(self, provider: str) -> None:
        if provider == "anthropic":
            error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
            replies = iter([Reply(status=429, body=json.dumps(error).encode())])
            self.anthropic.script = lambda request: next(replies, Reply())
        elif provider == "bedrock":
            self.bedrock.fail_next(429, "ThrottlingException", "Too many requests")
        else:
            self.vertex.failures.append((429, "RESOURCE_EXHAUSTED"))

    def received(self, provider: str) -> tuple[dict[str, str], dict[str, object]]:
        """The last request the provider received: lower-case headers, parsed body."""
        if provider == "anthropic":
            seen: MockRequest = self.anthropic.requests[-1]
            return dict(seen.headers), dict(seen.json or {})
        if provider == "bedrock":
            last = self.bedrock.seen[-1]
            return {k.lower(): v for k, v in last.headers.items()}, last.body
        last_v = self.vertex.seen[-1]
        return {k.lower(): v for k, v in last_v.headers.items()}, last_v.body


def expect_own_dialect(provider: str, headers: dict[str, str], body: dict[str, object]) -> None:
    rest = {k: v for k, v in WORKER_BODY.items() if k != "model"}
    if provider == "anthropic":
        assert body == {**rest, "model": SERVED["anthropic"]}
        assert headers["x-api-key"] == "sk-secret-anthropic-main"
        assert headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in headers
        assert not [name for name in headers if name.startswith("x-amz-")]
    elif provider == "bedrock":
        assert body == {
            **rest,
            "anthropic_version": "bedrock-2023-05-31",
            "anthropic_beta": ["b-1"],
        }
        assert not headers.keys() & ANTHROPIC_ONLY
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
    else:
        assert body == {**rest, "anthropic_version": "vertex-2023-10-16", "anthropic_beta": ["b-1"]}
        assert not headers.keys() & ANTHROPIC_ONLY
        assert headers["authorization"].startswith("Bearer ya29.")
        assert not [name for name in headers if name.startswith("x-amz-")]


@asynccontextmanager
async def clouds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Clouds]:
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-of-AKIATEST0001")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    async with AsyncExitStack() as stack:
        anthropic = await stack.enter_async_context(MockUpstream())
        bedrock = await stack.enter_async_context(
            mock_bedrock(REGION, lambda key: f"secret-of-{key}")
        )
        vertex = await stack.enter_async_context(mock_vertex())
        path = vertex.service_account_file(tmp_path / "sa.json")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
        yield Clouds(anthropic, bedrock, vertex)


async def call(gw: Gateway, key: str) -> int:
    """The worker's request: byte for byte the same on every hop, only the key changes."""
    response = await gw.client.post(
        f"{gw.url}/v1/messages",
        content=RAW,
        headers={
            "x-api-key": key,
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "b-1",
            "content-type": "application/json",
        },
    )
    return response.status_code


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("anthropic", "bedrock"),
        ("bedrock", "anthropic"),
        ("bedrock", "vertex"),
        ("vertex", "bedrock"),
        ("vertex", "anthropic"),
        ("anthropic", "vertex"),
    ],
)
async def test_a_hop_between_clouds_keeps_the_body_and_leaks_nothing(
    first: str,
    second: str,
    tmp_path: Path,
    stores_env: StoresEnv,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with clouds(tmp_path, monkeypatch) as mocks:
        accounts = [mocks.entry(first), mocks.entry(second)]
        env = gateway_env(tmp_path, accounts, **stores_env, extra=ENV)
        if first != "anthropic" and second != "anthropic":
            env.pop("LEASEGATE_CRED_ANTHROPIC_MAIN", None)
        async with in_process_gateway(env) as gw:
            minted = await gw.minted(model="claude-fleet", dispatch_id=f"d-{first}")
            assert minted["account_id"] == accounts[0]["id"]
            mocks.fail_next(first)
            assert await call(gw, minted["key"]) == 429
            expect_own_dialect(first, *mocks.received(first))
            await gw.revoke(minted["key_id"])
            hop = await gw.minted(
                model="claude-fleet",
                dispatch_id=f"d-{first}",
                retry_of_mint_decision_id=minted["mint_decision_id"],
            )
            assert (hop["account_id"], hop["hop"]) == (accounts[1]["id"], 1)
            assert await call(gw, hop["key"]) == 200
            expect_own_dialect(second, *mocks.received(second))
    assert mocks.bedrock.rejected == 0
    assert mocks.vertex.rejected == 0
