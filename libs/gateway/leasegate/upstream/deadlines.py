"""The three upstream deadlines, per account, and the reader that enforces the last two.

    headers      from the moment a pooled connection is in hand to the status line
                 (`UpstreamClients.send`; a miss is a 504 `upstream-timeout`)
    first token  from the first body read to the first event that carries the answer
                 (default 120 s; the idle deadline does not apply before it)
    idle         the longest wait for any next chunk of the body

The client's own read timeout is off on purpose: it would apply the same number to the headers
and to every gap between chunks, so a stream could never be allowed to idle longer than the
headers may take. The body deadlines time only the wait for the upstream, never the time spent
handing a chunk to a slow client, so a slow reader is not blamed on the account.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from leasegate.accounts import Account
from leasegate.upstream.errors import BodyFailed, StallPhase, UpstreamStalled


class DeadlineSettings(Protocol):
    """The defaults from `leasegate.config.Settings` (named structurally: a sibling adapter)."""

    @property
    def upstream_headers_timeout_s(self) -> float: ...
    @property
    def first_token_timeout_s(self) -> float | None: ...
    @property
    def stream_idle_timeout_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Deadlines:
    headers_s: float
    """Seconds from sending the request to the status line."""
    first_token_s: float | None
    """Seconds from the first body read to the first answer-bearing event; None: idle_s."""
    idle_s: float
    """Seconds the upstream may stay silent between two chunks of the body."""


def deadlines_for(account: Account, settings: DeadlineSettings) -> Deadlines:
    """The account's own values from the accounts file, else the LEASEGATE_* defaults."""
    headers_s, first_s, idle_s = (
        account.headers_timeout_s,
        account.first_token_timeout_s,
        account.stream_idle_timeout_s,
    )
    return Deadlines(
        headers_s=settings.upstream_headers_timeout_s if headers_s is None else headers_s,
        first_token_s=settings.first_token_timeout_s if first_s is None else first_s,
        idle_s=settings.stream_idle_timeout_s if idle_s is None else idle_s,
    )


class Body(Protocol):
    """The body of a response as aiohttp's `StreamReader` offers it."""

    def read_nowait(self, n: int = -1) -> bytes: ...
    def at_eof(self) -> bool: ...
    async def readany(self) -> bytes: ...
    def set_exception(self, exc: BaseException) -> None: ...


class BodyReader:
    """Reads a response body chunk by chunk, each wait bounded by the right deadline.

    Cheap per chunk: bytes already buffered are taken without waiting or timing anything, and
    one lazily re-armed timer serves the whole body (it is moved only when a deadline comes
    sooner than the one it is armed for; otherwise it re-arms itself when it fires early).
    A missed deadline fails the body with `UpstreamStalled`; call `close()` when done."""

    __slots__ = (
        "_body",
        "_deadlines",
        "_first_token_at",
        "_loop",
        "_timer",
        "_waiting",
        "_when",
        "_why",
    )

    def __init__(self, body: Body, deadlines: Deadlines) -> None:
        self._body = body
        self._deadlines = deadlines
        self._loop = asyncio.get_running_loop()
        self._first_token_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiting = False
        self._when = 0.0
        self._why: tuple[StallPhase, float] = ("idle", deadlines.idle_s)

    async def next(self, *, awaiting_first_token: bool = False) -> bytes | None:
        """The next chunk, or None at the end of the body. Raises `UpstreamStalled`, and
        `BodyFailed` when the connection fails."""
        if awaiting_first_token and self._first_token_at is None:
            first_s = self._deadlines.first_token_s
            if first_s is not None:
                self._first_token_at = self._loop.time() + first_s
        try:
            chunk = self._body.read_nowait()
            if chunk:
                return chunk
            if self._body.at_eof():
                return None
            self._arm(awaiting_first_token)
            self._waiting = True
            try:
                chunk = await self._body.readany()
            finally:
                self._waiting = False
        # RuntimeError: aiohttp's "Connection closed." for a wait on a lost connection.
        except (aiohttp.ClientError, OSError, RuntimeError) as exc:
            raise BodyFailed(f"the upstream connection failed ({type(exc).__name__})") from None
        return chunk or None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, awaiting_first_token: bool) -> None:
        now = self._loop.time()
        first_s = self._deadlines.first_token_s
        if awaiting_first_token and first_s is not None and self._first_token_at is not None:
            # One deadline for the whole wait: chunks without an answer (a preamble event, a
            # keep-alive comment) do not push it back.
            self._when, self._why = self._first_token_at, ("first-token", first_s)
        else:
            self._when, self._why = now + self._deadlines.idle_s, ("idle", self._deadlines.idle_s)
        if self._timer is not None and self._timer.when() > self._when:
            self._timer.cancel()
            self._timer = None
        if self._timer is None:
            self._timer = self._loop.call_at(self._when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if not self._waiting:
            return  # the next wait arms it again
        if self._loop.time() < self._when:
            self._timer = self._loop.call_at(self._when, self._fire)
            return
        self._body.set_exception(UpstreamStalled(*self._why))
