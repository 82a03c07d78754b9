"""Credentials from a cloud's own chain, attached per request: AWS SigV4 for `bedrock`,
Google OAuth2 access tokens for `vertex` and `vertex-gemini`.

A kind with a `cloud_auth` scheme (leasegate.providers) has no static key unless its account
names a `credential_env`: its requests are signed here, by the libraries every cloud user
already trusts (botocore; imported only when such an account exists, from the kind's extra).

`AwsSigner` resolves the AWS credential chain once, on the first request, in a thread
(environment, the shared profile `aws_profile`, web identity / IRSA, container and instance
metadata; `role_arn` assumed on top through STS). botocore's refreshable credentials renew
themselves before they expire; the refresh (a network call) runs in a thread, one at a time
behind an asyncio lock, and every other request signs with frozen credentials in a few
microseconds. `GoogleToken` does the same with Application Default Credentials (google-auth:
a service account file, workload identity federation, the metadata server): one access token
shared by the account's requests, refreshed in a thread by one request at a time when it is
within google-auth's refresh window of expiring, never one refresh per request. The signature
covers the final body bytes and the exact URL sent (the caller
never sees any of it, and no credential lands in a log or an exception).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from yarl import URL

from leasegate.upstream.errors import RequestNotSent

Headers = tuple[tuple[str, str], ...]


class Signer(Protocol):
    """The credential headers of one request, computed for it."""

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers: ...


class AwsSigner:
    """SigV4 for one account (service `bedrock`, its region)."""

    __slots__ = ("_account_id", "_credentials", "_lock", "_options", "_service")

    def __init__(self, account_id: str, options: Mapping[str, str], service: str = "bedrock"):
        self._account_id = account_id
        self._options = dict(options)
        self._service = service
        self._credentials: Any = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AwsSigner(account={self._account_id!r}, region={self._options['region']!r})"

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers:
        frozen = self.frozen()
        if frozen is None:
            async with self._lock:
                frozen = await asyncio.to_thread(self._refresh)
        return sigv4_headers(frozen, self._service, self._options["region"], url, headers, body)

    def frozen(self) -> Any:
        """Frozen credentials without any I/O, or None when a refresh (or the first look-up)
        is due: botocore's advisory window, minutes before they expire."""
        credentials = self._credentials
        if credentials is None:
            return None
        refresh_needed = getattr(credentials, "refresh_needed", None)
        if refresh_needed is not None and refresh_needed():
            return None
        return credentials.get_frozen_credentials()

    def _refresh(self) -> Any:
        if self._credentials is None:
            self._credentials = aws_credentials(self._options)
            if self._credentials is None:
                raise RequestNotSent(
                    f"account {self._account_id}: no AWS credentials found in the chain"
                )
        try:
            return self._credentials.get_frozen_credentials()
        except Exception as exc:  # botocore's refresh errors: name the type only
            raise RequestNotSent(
                f"account {self._account_id}: AWS credentials could not be refreshed "
                f"({type(exc).__name__})"
            ) from None


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
    frozen: Any, service: str, region: str, url: URL, headers: Headers, body: bytes
) -> Headers:
    """The SigV4 headers (authorization, x-amz-date, x-amz-security-token) for a POST of
    `body` to `url`; the content type is signed with them."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    content_type = next((v for n, v in headers if n == "content-type"), "application/json")
    request = AWSRequest(
        method="POST", url=str(url), data=body, headers={"content-type": content_type}
    )
    SigV4Auth(frozen, service, region).add_auth(request)
    return tuple(
        (name.lower(), value)
        for name, value in request.headers.items()
        if name.lower() != "content-type"
    )


GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleToken:
    """`authorization: Bearer <access token>` from Application Default Credentials."""

    __slots__ = ("_account_id", "_credentials", "_header", "_lock")

    def __init__(self, account_id: str) -> None:
        self._account_id = account_id
        self._credentials: Any = None
        self._header: Headers = ()
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"GoogleToken(account={self._account_id!r})"

    async def sign(self, url: URL, headers: Headers, body: bytes) -> Headers:
        credentials = self._credentials
        if credentials is not None and credentials.valid:  # google-auth's window included
            return self._header
        async with self._lock:  # one refresh at a time; the others wait for its token
            credentials = self._credentials
            if credentials is None or not credentials.valid:
                await asyncio.to_thread(self._refresh)
        return self._header

    def _refresh(self) -> None:
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
        self._header = (("authorization", f"Bearer {self._credentials.token}"),)


def signer_for(account_id: str, scheme: str | None, options: Mapping[str, str]) -> Signer | None:
    """The signer of an account whose kind names a `cloud_auth` scheme (None for others)."""
    if scheme == "aws-sigv4":
        return AwsSigner(account_id, options)
    if scheme == "google-adc":
        return GoogleToken(account_id)
    return None
