"""One aiohttp session per account, each with its own connection pool, built on first use.

Separate pools are what keep one account's saturation from slowing another's requests: a
request waits only for its own account's connections. The pool's size is a semaphore taken
before the session is asked for a connection, so the wait for our own pool is timed apart
from everything after it: past the pool timeout it is the gateway's refusal `PoolExhausted`
(`upstream-pool-exhausted`), never an upstream failure.

`send` owns the headers deadline (see deadlines.py): it starts when a connection is in hand
(reused, or once a new one is connected), so neither the pool wait nor a connect is mistaken
for a slow upstream. The relays own the first-token and idle deadlines of the body.

The credential is attached here and nowhere else: it is held in a private per-account table
of ready-made headers (the account's kind says which: `ProviderKind.credential_headers`),
never in a repr, a request object, or an exception this module raises. The kind also builds
the upstream path (`ProviderKind.upstream_path`: a deployment, a model in the path, a query);
each (account, endpoint, served model) URL is built once and kept. A kind that signs from its
cloud's credential chain (`ProviderKind.cloud_auth`: Bedrock's SigV4) gets its headers from a
per-account signer (cloud_auth.py) per request, computed over the final body; a kind whose
streams are not SSE has them decoded into SSE here (`ProviderKind.stream_decoder`), and its
error payloads put in the caller's wire's shape (`UpstreamResponse.error_payload`).
aiohttp measured ~15x cheaper per request than httpx's pool here (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp.connector import Connection
from aiohttp.tracing import Trace
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import SecretStr
from yarl import URL

from leasegate.accounts import Account, Registry
from leasegate.providers import Endpoint, ProviderKind
from leasegate.providers.base import StreamDecoder
from leasegate.upstream.caller_headers import HeaderPairs, forwarded_headers
from leasegate.upstream.cloud_auth import Signer, signer_for
from leasegate.upstream.deadlines import Body, Deadlines, DeadlineSettings, deadlines_for
from leasegate.upstream.errors import (
    DroppedAfterSend,
    HeadersTimeout,
    PoolExhausted,
    RequestNotSent,
    Unreachable,
    UpstreamError,
)

_CONNECT_S = 10.0
# The headers deadline of the request being sent in this task, for the connector to restart
# when a connection is in hand (see _Connector).
_IN_HAND: contextvars.ContextVar[_HeadersDeadline | None] = contextvars.ContextVar(
    "leasegate_upstream_in_hand", default=None
)


class PoolSettings(DeadlineSettings, Protocol):
    """The part of `leasegate.config.Settings` the clients read (a sibling adapter package,
    so it is named structurally rather than imported)."""

    @property
    def upstream_max_connections(self) -> int: ...
    @property
    def upstream_pool_timeout_s(self) -> float: ...


class UnknownAccountError(LookupError):
    """No configured account by this id (names the id only)."""


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """A request ready to send: no credential in it (`send` attaches the account's)."""

    account_id: str
    url: URL
    headers: tuple[tuple[str, str], ...]
    body: bytes


class UpstreamResponse:
    """The status line and headers; the body is read through `content` (see BodyReader).
    `close()` must be called once the caller is done: it frees the pool slot."""

    __slots__ = ("_kind", "_pool", "_response", "content", "headers", "status")

    def __init__(
        self, response: aiohttp.ClientResponse, pool: _Pool, kind: ProviderKind | None = None
    ) -> None:
        self._response: aiohttp.ClientResponse | None = response
        self._pool = pool
        self._kind = kind
        self.status = response.status
        self.headers: CIMultiDictProxy[str] = response.headers
        self.content: Body = response.content
        decoder = kind.stream_decoder() if kind is not None and self.is_success else None
        content_type = response.headers.get("content-type", "")
        if decoder is not None and kind is not None:
            if content_type.startswith(kind.stream_content_type):
                self.content = _DecodedBody(response.content, decoder)
                headers = CIMultiDict(response.headers)
                headers["content-type"] = "text/event-stream"
                self.headers = CIMultiDictProxy(headers)

    def error_payload(self, body: bytes) -> bytes:
        """An error body in the caller's wire's shape (the kind's `error_body`), else as is."""
        if self._kind is None or self.is_success:
            return body
        headers = {k.lower(): v for k, v in self.headers.items()}
        translated = self._kind.error_body(self.status, headers, body)
        return body if translated is None else translated

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def close(self) -> None:
        """Back to the pool if the body was read to its end, else the connection is closed.
        Safe to call more than once."""
        response, self._response = self._response, None
        if response is not None:
            response.release()
            self._pool.slots.release()


class UpstreamClients:
    """Per-account pools; `send` returns an `UpstreamResponse` the caller must `close()`."""

    def __init__(
        self, registry: Registry, credentials: Mapping[str, SecretStr], settings: PoolSettings
    ) -> None:
        self._pools: dict[str, _Pool] = {}
        self._fixed: dict[str, tuple[tuple[str, str], ...]] = {}
        self._defaults: dict[str, tuple[tuple[str, str], ...]] = {}
        self._deadlines: dict[str, Deadlines] = {}
        self._urls: dict[tuple[str, Endpoint, str | None, bool], URL] = {}
        self._signers: dict[str, Signer] = {}
        self._accounts: dict[str, Account] = {}
        self._pool_timeout_s = settings.upstream_pool_timeout_s
        self._default_size = settings.upstream_max_connections
        for account in registry.accounts:
            credential = credentials.get(account.id)
            signer = None
            if credential is None and account.kind.cloud_auth and account.configured:
                signer = signer_for(account.id, account.kind.cloud_auth, account.options)
            if credential is None and signer is None:
                continue
            if signer is not None:
                self._signers[account.id] = signer
            self._fixed[account.id] = (
                () if credential is None else _auth_headers(account, credential)
            )
            self._defaults[account.id] = account.kind.default_headers()
            self._deadlines[account.id] = deadlines_for(account, settings)
            self._accounts[account.id] = account

    def __repr__(self) -> str:
        return f"UpstreamClients(accounts={sorted(self._accounts)!r})"

    def pool(self, account_id: str) -> _Pool:
        """The account's pool (its session is made on first use, inside the event loop)."""
        pool = self._pools.get(account_id)
        if pool is None:
            account = self._accounts.get(account_id)
            if account is None:
                raise UnknownAccountError(f"no configured account {account_id!r}")
            pool = _Pool(account.max_connections or self._default_size)
            self._pools[account_id] = pool
        return pool

    def build_request(
        self,
        account: Account,
        endpoint: Endpoint,
        body: bytes,
        caller_headers: HeaderPairs,
        *,
        served_model: str | None = None,
        stream: bool = False,
    ) -> UpstreamRequest:
        """POST to the account's upstream path for `endpoint` (its kind builds it from the
        served model) with the caller's allow-listed headers (see caller_headers.py) and the
        kind's defaults; the credential is added by `send`."""
        defaults = self._defaults.get(account.id)
        if defaults is None:
            raise UnknownAccountError(f"no configured account {account.id!r}")
        kind = account.kind
        where = (account.id, endpoint, served_model, stream)
        url = self._urls.get(where)
        if url is None:
            path = kind.upstream_target(endpoint, served_model or "", account.options, stream)
            # a signed URL is sent exactly as signed (its %-escapes kept)
            encoded = kind.cloud_auth is not None
            url = self._urls[where] = URL(account.base_url + path, encoded=encoded)
        headers = [
            (name.decode("ascii"), value.decode("latin-1"))
            for name, value in forwarded_headers(caller_headers, kind.forwarded_headers)
        ]
        names = {name for name, _ in headers}
        for name, value in defaults:
            if name not in names:
                headers.append((name, value))
        if "content-type" not in names:
            headers.append(("content-type", "application/json"))
        return UpstreamRequest(account.id, url, tuple(headers), body)

    def deadlines(self, account_id: str) -> Deadlines:
        try:
            return self._deadlines[account_id]
        except KeyError:
            raise UnknownAccountError(f"no configured account {account_id!r}") from None

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """Send on the account's own pool; wait for the status line at most the account's
        headers deadline once a connection is in hand. Raises `UpstreamError` subclasses:
        map them with `failures.send_failure`."""
        pool = self.pool(request.account_id)
        credential = self._fixed[request.account_id]
        signer = self._signers.get(request.account_id)
        if signer is not None:
            signed = await signer.sign(request.url, request.headers, request.body)
            credential = signed  # a signed account has no static key
        await pool.take(self._pool_timeout_s, request.account_id)
        headers_s = self._deadlines[request.account_id].headers_s
        hook = _HeadersDeadline(headers_s)
        token = _IN_HAND.set(hook)
        try:
            async with asyncio.timeout(_CONNECT_S + headers_s) as hook.deadline:
                response = await pool.session().post(
                    request.url,
                    data=request.body,
                    headers=request.headers + credential,
                    allow_redirects=False,
                )
        except BaseException as exc:
            pool.slots.release()
            expired = hook.deadline is not None and hook.deadline.expired()
            mapped = send_error(
                exc, request.account_id, headers_s, headers_expired=expired, sending=hook.sending
            )
            if mapped is None:
                raise  # cancellation and bugs pass through unchanged
            raise mapped from None
        finally:
            _IN_HAND.reset(token)
            hook.deadline = None
        return UpstreamResponse(response, pool, self._accounts[request.account_id].kind)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()


class _DecodedBody:
    """A cloud's stream framing decoded into SSE as its bytes are read (a whole frame at a
    time: bytes of a frame not yet complete wait in the decoder)."""

    __slots__ = ("_body", "_decoder")

    def __init__(self, body: aiohttp.StreamReader, decoder: StreamDecoder) -> None:
        self._body = body
        self._decoder = decoder

    def read_nowait(self, n: int = -1) -> bytes:
        data = self._body.read_nowait(n)
        return self._decode(data) if data else b""

    def at_eof(self) -> bool:
        return self._body.at_eof()

    async def readany(self) -> bytes:
        while data := await self._body.readany():
            if out := self._decode(data):
                return out
        return b""

    def set_exception(self, exc: BaseException) -> None:
        self._body.set_exception(exc)

    def _decode(self, data: bytes) -> bytes:
        try:
            return self._decoder.feed(data)
        except Exception:  # a corrupt frame (botocore's ParserError family)
            raise aiohttp.ClientPayloadError("the upstream's event stream is corrupt") from None


class _Pool:
    """One account's connections: a semaphore of its size in front of its own session."""

    __slots__ = ("_session", "size", "slots")

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots = asyncio.Semaphore(size)
        self._session: aiohttp.ClientSession | None = None

    async def take(self, timeout_s: float, account_id: str) -> None:
        if not self.slots.locked():
            await self.slots.acquire()  # free: returns without suspending
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self.slots.acquire()
        except TimeoutError:
            raise PoolExhausted(
                f"no free connection to account {account_id} within {timeout_s:g} s"
            ) from None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                # limit=0: the semaphore above is the pool's size; the connector never queues.
                connector=_Connector(limit=0, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_S),
                # The proxy relays bytes as they come and scans them for usage.
                auto_decompress=False,
                headers={"accept-encoding": "identity"},
                # No proxies or netrc credentials picked up from the environment.
                trust_env=False,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class _HeadersDeadline:
    __slots__ = ("deadline", "headers_s", "sending")

    def __init__(self, headers_s: float) -> None:
        self.headers_s = headers_s
        self.deadline: asyncio.Timeout | None = None
        self.sending = False
        """A connection was in hand: the request started going out."""


class _Connector(aiohttp.TCPConnector):
    """Restarts the sending request's headers deadline when its connection is in hand."""

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's signature, overridden
    ) -> Connection:
        connection = await super().connect(req, traces, timeout)
        hook = _IN_HAND.get()
        if hook is not None and hook.deadline is not None:
            hook.sending = True
            hook.deadline.reschedule(asyncio.get_running_loop().time() + hook.headers_s)
        return connection


def send_error(
    exc: BaseException,
    account_id: str,
    headers_s: float,
    *,
    headers_expired: bool,
    sending: bool = False,
) -> UpstreamError | None:
    """The adapter's own exception for what the client library raised before the status
    line; None for what is not an upstream failure (cancellation, a bug)."""
    if isinstance(exc, TimeoutError) and headers_expired:
        return HeadersTimeout(f"no response headers within {headers_s:g} s")
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return RequestNotSent(f"the request to account {account_id} could not be sent")
    if sending and isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError):
        # We had a connection and were sending: what the peer did with our request says
        # nothing sure about reaching the account (the request itself may be the cause).
        return DroppedAfterSend(f"account {account_id} dropped the connection")
    if isinstance(exc, aiohttp.ClientError | OSError):
        # refused, DNS, TLS, connect timeout, reset, closed before a status line
        return Unreachable(f"account {account_id} could not be reached ({type(exc).__name__})")
    return None


def _auth_headers(account: Account, credential: SecretStr) -> tuple[tuple[str, str], ...]:
    secret = credential.get_secret_value()
    # A control character would make the client raise with the header value in its message.
    if not secret or not secret.isascii() or not secret.isprintable() or " " in secret:
        raise ValueError(f"account {account.id!r}: the credential is not a valid header value")
    return account.kind.credential_headers(secret)
