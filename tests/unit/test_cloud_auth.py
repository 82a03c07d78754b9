"""The per-request SigV4 signature is botocore's, byte for byte: the same headers as
`botocore.auth.SigV4Auth` computes for the same request at the same instant (ports, a query,
an ARN's %-escapes in the path, with and without a session token)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from yarl import URL

from leasegate.upstream.cloud_auth import sigv4_headers

NOW = datetime(2026, 12, 2, 4, 58, 7, tzinfo=UTC)


def botocore_signature(frozen: ReadOnlyCredentials, url: str, body: bytes) -> dict[str, str]:
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"content-type": "application/json"}
    )
    stamp = NOW.strftime("%Y%m%dT%H%M%SZ")
    request.context["timestamp"] = stamp
    request.headers["X-Amz-Date"] = stamp
    if frozen.token:
        request.headers["X-Amz-Security-Token"] = frozen.token
    signer = SigV4Auth(frozen, "bedrock", "eu-central-1")
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    scope = signer.scope(request)
    names = signer.signed_headers(signer.headers_to_sign(request))
    headers = {
        "authorization": (
            f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={names}, Signature={signature}"
        ),
        "x-amz-date": stamp,
    }
    if frozen.token:
        headers["x-amz-security-token"] = frozen.token
    return headers


@pytest.mark.parametrize(
    "url",
    [
        "https://bedrock-runtime.eu-central-1.amazonaws.com/model/"
        "eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
        "http://127.0.0.1:8765/model/arn%3Aaws%3Abedrock%3Aeu-central-1%3A123456789012"
        "%3Ainference-profile%2Feu.anthropic.claude-x/invoke-with-response-stream",
        "https://bedrock.example:8443/prefix/model/m/invoke?b=2&a=1",
    ],
)
@pytest.mark.parametrize("token", [None, "session-token"])
def test_the_signature_is_botocores(url: str, token: str | None) -> None:
    frozen = ReadOnlyCredentials("AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG", token)
    body = b'{"max_tokens": 8, "anthropic_version": "bedrock-2023-05-31"}'
    ours = sigv4_headers(
        frozen,
        "bedrock",
        "eu-central-1",
        URL(url, encoded=True),
        (("content-type", "application/json"),),
        body,
        now=NOW,
    )
    assert dict(ours) == botocore_signature(frozen, url, body)
