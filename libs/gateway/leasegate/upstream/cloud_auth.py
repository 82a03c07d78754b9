"""Credentials from a cloud's own chain, attached per request: AWS SigV4 for `bedrock`,
Google OAuth2 access tokens for `vertex` and `vertex-gemini`.

A kind with a `cloud_auth` scheme (leasegate.providers) has no static key unless its account
names a `credential_env`: its requests are signed here, with credentials from the libraries
every cloud user already trusts (botocore, google-auth; imported only when such an account
exists, from the kind's extra).

`AwsSigner` resolves the AWS credential chain once, on the first request, in a thread
(environment, the shared profile `aws_profile`, web identity / IRSA, container and instance
metadata; `role_arn` assumed on top through STS). botocore's refreshable credentials renew
themselves before they expire; the refresh (a network call) runs in a thread, one at a time
behind an asyncio lock, and every other request signs with frozen credentials. The signature
itself is computed here (`sigv4_headers`: AWS's published algorithm, checked against
botocore's signer by the tests) over the final body bytes and the exact URL sent.

`GoogleToken` does the same with Application Default Credentials (a service account file,
workload identity federation, the metadata server): one access token shared by the account's
requests, refreshed in a thread by one request at a time when it is within google-auth's
refresh window of expiring, never one refresh per request. No credential lands in a log, a
repr or an exception.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

from yarl import URL

from leasegate.upstream.errors import RequestNotSent

Headers = tuple[tuple[str, str], ...]
_RECHECK_S = 1.0
"""How long frozen credentials are reused before botocore is asked again whether they are due
(its advisory window is minutes before expiry: a second late is nothing)."""


class Signer(Protocol):
    """The credential headers of one request, computed for it."""

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers: ...


class AwsSigner:
    """SigV4 for one account (service `bedrock`, its region)."""

    __slots__ = (
        "_account_id",
        "_checked_until",
        "_credentials",
        "_frozen",
        "_lock",
        "_options",
        "_service",
    )

    def __init__(self, account_id: str, options: Mapping[str, str], service: str = "bedrock"):
        self._account_id = account_id
        self._options = dict(options)
        self._service = service
        self._credentials: Any = None
        self._frozen: Any = None
        self._checked_until = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AwsSigner(account={self._account_id!r}, region={self._options['region']!r})"

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers:
        frozen = self.frozen()
        if frozen is None:
            async with self._lock:  # one refresh at a time; the others take its result
                frozen = self.frozen() or await asyncio.to_thread(self._refresh)
        return sigv4_headers(frozen, self._service, self._options["region"], url, headers, body)

    def frozen(self) -> Any:
        """Frozen credentials without any I/O, or None when a refresh (or the first look-up)
        is due: botocore's advisory window, minutes before they expire."""
        now = time.monotonic()
        if now < self._checked_until:
            return self._frozen  # asked botocore less than a second ago
        credentials = self._credentials
        if credentials is None:
            return None
        refresh_needed = getattr(credentials, "refresh_needed", None)
        if refresh_needed is not None and refresh_needed():
            return None
        self._frozen = credentials.get_frozen_credentials()
        self._checked_until = now + _RECHECK_S
        return self._frozen

    def _refresh(self) -> Any:
        if self._credentials is None:
            self._credentials = aws_credentials(self._options)
            if self._credentials is None:
                raise RequestNotSent(
                    f"account {self._account_id}: no AWS credentials found in the chain"
                )
        try:
            self._frozen = self._credentials.get_frozen_credentials()
        except Exception as exc:  # botocore's refresh errors: name the type only
            raise RequestNotSent(
                f"account {self._account_id}: AWS credentials could not be refreshed "
                f"({type(exc).__name__})"
            ) from None
        self._checked_until = time.monotonic() + _RECHECK_S
        return self._frozen


def aws_credentials(options: Mapping[str, str]) -> Any:
    """The account's credentials from botocore's chain (blocking: call it in a thread)."""
    import botocore.credentials
    import botocore.session

    session = botocore.session.Session(profile=options.get("aws_profile"))
    session.set_config_variable("region", options["region"])
    source = session.get_credentials()
    role = options.get("role_arn")
    if role is None or source is None:
        return source
    fetcher = botocore.credentials.AssumeRoleCredentialFetcher(
        client_creator=session.create_client,
        source_credentials=source,
        role_arn=role,
        extra_args={"RoleSessionName": "leasegate"},
    )
    return botocore.credentials.DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )


def sigv4_headers(
    frozen: Any,
    service: str,
    region: str,
    url: URL,
    headers: Headers,
    body: bytes,
    now: datetime | None = None,
) -> Headers:
    """The SigV4 headers (authorization, x-amz-date, x-amz-security-token) for a POST of
    `body` to `url`, signing the content type, host, date and token.

    AWS's published algorithm, written lean for the per-request path: botocore's
    `SigV4Auth` (which the tests' mock Bedrock uses to verify every request) spends most of
    its ~0.1 ms on generic header objects; this takes ~0.02 ms, the signing key cached per
    (secret, day, region, service)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    content_type = next((v for n, v in headers if n == "content-type"), "application/json")
    signed = {"content-type": " ".join(content_type.split()), "host": _host(url)}
    signed["x-amz-date"] = stamp
    token = frozen.token
    if token:
        signed["x-amz-security-token"] = token
    names = ";".join(sorted(signed))
    canonical = "\n".join(
        (
            "POST",
            quote(url.raw_path, safe="/~"),
            "&".join(sorted(url.raw_query_string.split("&"))) if url.raw_query_string else "",
            "".join(f"{name}:{signed[name]}\n" for name in sorted(signed)),
            names,
            hashlib.sha256(body).hexdigest(),
        )
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ("AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest())
    )
    key = _signing_key(frozen.secret_key, day, region, service)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={frozen.access_key}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    out = [("authorization", authorization), ("x-amz-date", stamp)]
    if token:
        out.append(("x-amz-security-token", token))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _host(url: URL) -> str:
    host = url.raw_host or ""
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal
    port = url.explicit_port
    default = {"http": 80, "https": 443}.get(url.scheme)
    return host if port is None or port == default else f"{host}:{port}"


GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleToken:
    """`authorization: Bearer <access token>` from Application Default Credentials.

    The refresh runs in a thread and google-auth refreshes its credentials in place, so the
    requests on the loop read only `_current`: the credentials and their header, published
    together by the loop once the thread is done. (Reading the credentials themselves, a
    request could see the first token already valid while its header was not written yet,
    and went out with no `authorization` at all: a 401 from Vertex under load.)"""

    __slots__ = ("_account_id", "_credentials", "_current", "_lock")

    def __init__(self, account_id: str) -> None:
        self._account_id = account_id
        self._credentials: Any = None
        """Touched only by the refresh thread, one at a time (the lock)."""
        self._current: tuple[Any, Headers] | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"GoogleToken(account={self._account_id!r})"

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers:
        current = self._current
        if current is not None and current[0].valid:  # google-auth's window included
            return current[1]
        async with self._lock:  # one refresh at a time; the others wait for its token
            current = self._current
            if current is None or not current[0].valid:
                current = self._current = await asyncio.to_thread(self._refresh)
        return current[1]

    def _refresh(self) -> tuple[Any, Headers]:
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests

        try:
            if self._credentials is None:
                self._credentials, _ = google.auth.default(scopes=[GOOGLE_SCOPE])
            self._credentials.refresh(google.auth.transport.requests.Request())
        except google.auth.exceptions.GoogleAuthError as exc:
            raise RequestNotSent(
                f"account {self._account_id}: no Google access token ({type(exc).__name__})"
            ) from None
        return self._credentials, (("authorization", f"Bearer {self._credentials.token}"),)


def signer_for(account_id: str, scheme: str | None, options: Mapping[str, str]) -> Signer | None:
    """The signer of an account whose kind names a `cloud_auth` scheme (None for others)."""
    if scheme == "aws-sigv4":
        return AwsSigner(account_id, options)
    if scheme == "google-adc":
        return GoogleToken(account_id)
    return None
