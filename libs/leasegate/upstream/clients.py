"""One httpx.AsyncClient per account, built once, each with its own connection pool.

Separate pools are what keep one account's saturation from slowing another's requests: a
request waits only for its own account's connections, and a wait past the pool timeout is the
gateway's refusal `upstream-pool-exhausted` (see failures.py), not an upstream failure.

`send` owns the headers deadline (see deadlines.py): it starts when a pooled connection is in
hand, so a wait for our own pool is never mistaken for a slow upstream. httpx's read timeout is
off; the proxy's relays own the first-token and idle deadlines of the body.

The credential is attached here and nowhere else. It is held as pre-encoded header bytes in
a private table, never in a repr, and never in an exception this module raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import httpx
from pydantic import SecretStr

from leasegate.accounts import Account, Registry
from leasegate.upstream.caller_headers import HeaderPairs, forwarded_headers
from leasegate.upstream.deadlines import Deadlines, DeadlineSettings, deadlines_for
from leasegate.upstream.failures import DroppedAfterSend

ANTHROPIC_VERSION = b"2023-06-01"

_CONNECT_S = 10.0
_WRITE_S = 30.0


class PoolSettings(DeadlineSettings, Protocol):
    """The part of `leasegate.config.Settings` the clients read (a sibling adapter package,
    so it is named structurally rather than imported)."""

    @property
    def upstream_max_connections(self) -> int: ...
    @property
    def upstream_pool_timeout_s(self) -> float: ...


class UnknownAccountError(LookupError):
    """No configured account by this id (names the id only)."""


class UpstreamClients:
    """`send` returns a streaming response: the caller reads it and must `aclose()` it."""

    def __init__(
        self,
        registry: Registry,
        credentials: Mapping[str, SecretStr],
        settings: PoolSettings,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._auth: dict[str, tuple[tuple[bytes, bytes], ...]] = {}
        self._deadlines: dict[str, Deadlines] = {}
        # Bounds the whole send for a transport that reports no trace events (MockTransport):
        # everything before the connection is in hand has its own httpx timeout.
        self._before_connection_s = settings.upstream_pool_timeout_s + _CONNECT_S
        for account in registry.accounts:
            credential = credentials.get(account.id)
            if credential is None:
                continue
            self._auth[account.id] = _auth_headers(account, credential)
            self._deadlines[account.id] = deadlines_for(account, settings)
            self._clients[account.id] = _client(account, settings, transport)

    def __repr__(self) -> str:
        return f"UpstreamClients(accounts={sorted(self._clients)!r})"

    def client(self, account_id: str) -> httpx.AsyncClient:
        try:
            return self._clients[account_id]
        except KeyError:
            raise UnknownAccountError(f"no configured account {account_id!r}") from None

    def build_request(
        self,
        account: Account,
        path: str,
        body: bytes,
        caller_headers: HeaderPairs,
    ) -> httpx.Request:
        """POST `account.base_url + path` with the account's credential and the caller's
        allow-listed headers (see caller_headers.py; Starlette's Headers or plain pairs)."""
        client = self.client(account.id)
        headers = forwarded_headers(caller_headers)
        if account.speaks_anthropic and not any(
            name == b"anthropic-version" for name, _ in headers
        ):
            headers.append((b"anthropic-version", ANTHROPIC_VERSION))
        if not any(name == b"content-type" for name, _ in headers):
            headers.append((b"content-type", b"application/json"))
        headers.extend(self._auth[account.id])
        return client.build_request("POST", account.base_url + path, content=body, headers=headers)

    def deadlines(self, account_id: str) -> Deadlines:
        try:
            return self._deadlines[account_id]
        except KeyError:
            raise UnknownAccountError(f"no configured account {account_id!r}") from None

    async def send(self, account_id: str, request: httpx.Request) -> httpx.Response:
        """Send on the account's own pool and wait for the status line at most the account's
        headers timeout. Raises httpx.TransportError subclasses (a missed headers deadline is
        a ReadTimeout; a connection lost once the request had started going out is
        `DroppedAfterSend`): map them with `failures.send_failure`."""
        client = self.client(account_id)
        headers_s = self._deadlines[account_id].headers_s
        hook = _HeadersDeadline(headers_s)
        request.extensions["trace"] = hook.trace
        try:
            async with asyncio.timeout(self._before_connection_s + headers_s) as deadline:
                hook.deadline = deadline
                return await client.send(request, stream=True)
        except TimeoutError:
            raise httpx.ReadTimeout(
                f"no response headers within {headers_s:g} s", request=request
            ) from None
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
            if not hook.sending:
                raise
            # We had a connection and were sending: what the peer did with our request says
            # nothing sure about reaching the account (the request itself may be the cause).
            raise DroppedAfterSend(type(exc).__name__, request=request) from None
        finally:
            # The hook stays on the request while its body streams: from here on it is inert.
            hook.deadline = None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


class _HeadersDeadline:
    """An httpcore `trace` hook: when the request starts going out on a connection, the
    deadline becomes now + the headers timeout (pool wait and connect are behind us)."""

    __slots__ = ("deadline", "headers_s", "sending")

    def __init__(self, headers_s: float) -> None:
        self.headers_s = headers_s
        self.deadline: asyncio.Timeout | None = None
        self.sending = False
        """The request started going out on an established connection."""

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        if self.deadline is not None and event.endswith(".send_request_headers.started"):
            self.sending = True
            self.deadline.reschedule(asyncio.get_running_loop().time() + self.headers_s)


def _client(
    account: Account, settings: PoolSettings, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    size = account.max_connections or settings.upstream_max_connections
    return httpx.AsyncClient(
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
        # read=None: `send` and the relays own the headers, first-token and idle deadlines.
        timeout=httpx.Timeout(
            connect=_CONNECT_S, read=None, write=_WRITE_S, pool=settings.upstream_pool_timeout_s
        ),
        transport=transport,
        # The proxy relays bytes as they come and scans them for usage: no compression.
        headers={"accept-encoding": "identity"},
        # No proxies, netrc credentials or redirects picked up from the environment.
        trust_env=False,
        follow_redirects=False,
    )


def _auth_headers(account: Account, credential: SecretStr) -> tuple[tuple[bytes, bytes], ...]:
    secret = credential.get_secret_value()
    # A control character would make h11 raise with the header value in its message.
    if not secret or not secret.isascii() or not secret.isprintable() or " " in secret:
        raise ValueError(f"account {account.id!r}: the credential is not a valid header value")
    token = secret.encode("ascii")
    if account.speaks_anthropic:
        return ((b"x-api-key", token),)
    return ((b"authorization", b"Bearer " + token),)
