"""A `bedrock` account through the whole gateway, against a mock Bedrock that verifies every
request's SigV4 signature: the official `anthropic` SDK, pointed at the proxy, gets its answer
and its stream (decoded from AWS's event stream) as from Anthropic; the served name (an
inference profile) is in the path, the body has Bedrock's version and no `model`, no
Anthropic header reaches AWS; evidence has the counts (cache reads and writes); AWS's errors
are classified and reach the SDK as Anthropic's; credentials that expire during the run are
refreshed without a failed request."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fixtures.gateways import Gateway, gateway_env, in_process_gateway
from tests.fixtures.mock_clouds import CLOUD_ENV, MockBedrock, mock_bedrock
from tests.fixtures.scripted import account_health, only_row
from tests.fixtures.services import StoresEnv

REGION = "eu-central-1"
PROFILE = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


def _secret(access_key: str) -> str | None:
    return f"secret-of-{access_key}" if access_key.startswith("AKIATEST") else None


def _isolated_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def bedrock_entry(mock: MockBedrock, **extra: Any) -> dict[str, Any]:
    return {
        "id": "bedrock-eu",
        "provider": "bedrock",
        "base_url": mock.url,
        "region": REGION,
        "models": {
            "claude-fleet": {
                "served": PROFILE,
                "prices": {
                    "input": "3",
                    "output": "15",
                    "cache_read": "0.3",
                    "cache_write": "3.75",
                },
            },
            "claude-small": "anthropic.claude-haiku-4-5-20251001-v1:0",
        },
        **extra,
    }


@pytest.fixture
async def gw(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Gateway, MockBedrock]]:
    _isolated_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", _secret("AKIATEST0001") or "")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-1")
    async with mock_bedrock(REGION, _secret) as mock:
        env = gateway_env(
            tmp_path, [bedrock_entry(mock)], **stores_env, extra=CLOUD_ENV, currency="USD"
        )
        async with in_process_gateway(env) as gateway:
            yield gateway, mock


def sdk(gw: Gateway, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.url, api_key=key, max_retries=0)


async def test_the_anthropic_sdk_talks_to_bedrock_through_the_proxy(
    gw: tuple[Gateway, MockBedrock],
) -> None:
    gateway, mock = gw
    minted = await gateway.minted(model="claude-fleet", dispatch_id="d-bedrock-1")
    async with sdk(gateway, minted["key"]) as client:
        message = await client.messages.create(
            model="claude-fleet",
            max_tokens=64,
            messages=MESSAGES,
            extra_headers={"anthropic-beta": "prompt-caching-2024-07-31"},
        )
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello from Bedrock"
    assert message.usage.cache_read_input_tokens == 7
    (seen,) = mock.seen
    assert seen.path == "/model/eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
    assert seen.access_key == "AKIATEST0001"
    assert seen.headers["x-amz-security-token"] == "session-token-1"
    assert seen.body == {
        "max_tokens": 64,
        "messages": MESSAGES,
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["prompt-caching-2024-07-31"],
    }
    lowered = {name.lower() for name in seen.headers}
    assert not lowered & {"anthropic-version", "anthropic-beta", "x-api-key"}
    assert mock.rejected == 0
    row = await only_row(gateway, minted)
    assert (row["outcome"], row["served_model"], row["input_tokens"], row["output_tokens"]) == (
        "success",
        PROFILE,
        20,
        5,
    )
    assert (row["cache_read_input_tokens"], row["cache_creation_input_tokens"]) == (7, 3)
    # Anthropic's counts: cached tokens beside the input, each at its own price (per 1M)
    assert (
        Decimal(row["cost"]) == (20 * 3 + 5 * 15 + 7 * Decimal("0.3") + 3 * Decimal("3.75")) / 10**6
    )

    streamed = await gateway.minted(model="claude-fleet", dispatch_id="d-bedrock-2")
    async with sdk(gateway, streamed["key"]) as client:
        async with client.messages.stream(
            model="claude-fleet", max_tokens=64, messages=MESSAGES
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            final = await stream.get_final_message()
    assert text == "w0 w1 w2 "
    assert final.usage.output_tokens == 3
    assert mock.seen[-1].path.endswith("%3A0/invoke-with-response-stream")
    assert "stream" not in mock.seen[-1].body
    row = await only_row(gateway, streamed)
    assert (row["outcome"], row["stream"], row["input_tokens"], row["output_tokens"]) == (
        "success",
        True,
        12,
        3,
    )
    assert (row["cache_read_input_tokens"], row["cache_creation_input_tokens"]) == (4, 2)
    assert (
        Decimal(row["cost"]) == (12 * 3 + 3 * 15 + 4 * Decimal("0.3") + 2 * Decimal("3.75")) / 10**6
    )


async def test_aws_errors_are_classified_and_raise_in_the_sdk(
    gw: tuple[Gateway, MockBedrock],
) -> None:
    gateway, mock = gw
    minted = await gateway.minted(model="claude-fleet", dispatch_id="d-bedrock-3")
    mock.fail_next(429, "ThrottlingException", "Too many requests, please wait.")
    async with sdk(gateway, minted["key"]) as client:
        with pytest.raises(anthropic.RateLimitError):
            await client.messages.create(model="claude-fleet", max_tokens=8, messages=MESSAGES)
    row = await only_row(gateway, minted)
    assert (row["outcome"], row["scope"], row["error_code"].lower()) == (
        "upstream-error",
        "model",
        "throttlingexception",
    )
    cooling = (await account_health(gateway, "bedrock-eu"))["cooling_models"]
    assert [c["model"] for c in cooling] == [PROFILE]

    denied = await gateway.minted(model="claude-small", dispatch_id="d-bedrock-4")
    mock.fail_next(403, "AccessDeniedException", "You don't have access to the model.")
    async with sdk(gateway, denied["key"]) as client:
        with pytest.raises(anthropic.PermissionDeniedError):
            await client.messages.create(model="claude-small", max_tokens=8, messages=MESSAGES)
    row = await only_row(gateway, denied)
    assert (row["scope"], row["error_code"].lower()) == ("account", "accessdeniedexception")
    health = await account_health(gateway, "bedrock-eu")
    assert health["circuit"]["open"] is True


async def test_an_error_inside_the_event_stream_raises_in_the_sdk(
    gw: tuple[Gateway, MockBedrock],
) -> None:
    gateway, mock = gw
    mock.stream_failure = "modelStreamErrorException"
    minted = await gateway.minted(model="claude-fleet", dispatch_id="d-bedrock-5")
    async with sdk(gateway, minted["key"]) as client:
        with pytest.raises(anthropic.APIStatusError):
            await _drain(client)
    row = await only_row(gateway, minted)
    assert (row["outcome"], row["scope"], row["error_code"].lower()) == (
        "in-stream-error",
        "model",
        "modelstreamerrorexception",
    )


async def _drain(client: anthropic.AsyncAnthropic) -> None:
    async with client.messages.stream(
        model="claude-fleet", max_tokens=8, messages=MESSAGES
    ) as stream:
        async for _ in stream.text_stream:
            pass


_PROCESS = """\
import json, sys, time, pathlib
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
expires = time.gmtime(time.time() + 15 * 60 + 1.5)
print(json.dumps({
    "Version": 1,
    "AccessKeyId": f"AKIATEST{n:04d}",
    "SecretAccessKey": f"secret-of-AKIATEST{n:04d}",
    "SessionToken": f"session-token-{n}",
    "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", expires),
}))
"""


async def test_credentials_that_expire_during_a_run_are_refreshed_without_a_failed_request(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared profile whose credential_process hands out credentials valid 15 min + 1.5 s:
    botocore's advisory window (15 min) makes them due for refresh 1.5 s after issue; every
    request in the run succeeds, signed with more than one set of credentials."""
    import asyncio

    _isolated_aws(monkeypatch, tmp_path)
    script = tmp_path / "creds.py"
    script.write_text(_PROCESS)
    (tmp_path / "aws-config").write_text(
        "[profile bedrock-prod]\n"
        f"credential_process = {sys.executable} {script} {tmp_path / 'counter'}\n"
    )
    async with mock_bedrock(REGION, _secret) as mock:
        entry = bedrock_entry(mock, aws_profile="bedrock-prod")
        env = gateway_env(tmp_path, [entry], **stores_env, extra=CLOUD_ENV, currency="USD")
        async with in_process_gateway(env) as gateway:
            key = (await gateway.minted(model="claude-fleet", dispatch_id="d-b-6"))["key"]
            async with sdk(gateway, key) as client:
                for _ in range(8):
                    message = await client.messages.create(
                        model="claude-fleet", max_tokens=8, messages=MESSAGES
                    )
                    assert message.content[0].type == "text"
                    await asyncio.sleep(0.5)
    assert mock.rejected == 0
    keys = [seen.access_key for seen in mock.seen]
    assert len(keys) == 8
    assert len(set(keys)) >= 2, keys
    assert json.loads((tmp_path / "counter").read_text()) == len(set(keys))


async def test_irsa_web_identity_credentials_from_sts_sign_the_requests(
    tmp_path: Path, stores_env: StoresEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EKS IRSA: the pod has AWS_ROLE_ARN and a projected token file; botocore's chain asks
    STS (here the mock, by AWS_ENDPOINT_URL_STS) for credentials with that token once, and
    every Bedrock request is signed with what STS issued."""
    _isolated_aws(monkeypatch, tmp_path)
    role = "arn:aws:iam::123456789012:role/leasegate-bedrock"
    token_file = tmp_path / "eks-token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.service-account-token.sig")
    async with mock_bedrock(REGION, _secret) as mock:
        mock.web_identity = (role, token_file.read_text())
        monkeypatch.setenv("AWS_ROLE_ARN", role)
        monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", mock.url)
        monkeypatch.setenv("AWS_REGION", REGION)
        env = gateway_env(
            tmp_path, [bedrock_entry(mock)], **stores_env, extra=CLOUD_ENV, currency="USD"
        )
        async with in_process_gateway(env) as gateway:
            key = (await gateway.minted(model="claude-fleet", dispatch_id="d-b-irsa"))["key"]
            async with sdk(gateway, key) as client:
                for _ in range(3):
                    await client.messages.create(
                        model="claude-fleet", max_tokens=8, messages=MESSAGES
                    )
    assert [call["Action"] for call in mock.sts_calls] == ["AssumeRoleWithWebIdentity"]
    assert mock.rejected == 0
    assert [seen.access_key for seen in mock.seen] == ["AKIATEST0701"] * 3
    assert mock.seen[0].headers["x-amz-security-token"] == "irsa-session-AKIATEST0701"
