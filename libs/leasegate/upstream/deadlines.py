"""The three upstream deadlines, per account, and the reader that enforces the last two.

    headers      from the moment a pooled connection is in hand to the status line
                 (`UpstreamClients.send`; a miss is a 504 `upstream-timeout`)
    first token  from the first body read to the first event that carries the answer
                 (default 120 s; the idle deadline does not apply before it)
    idle         the longest wait for any next chunk of the body

httpx's own read timeout is off on purpose: it would apply the same number to the headers and
to every gap between chunks, so a stream could never be allowed to idle longer than the
headers may take. The body deadlines time only the wait for the upstream, never the time spent
handing a chunk to a slow client, so a slow reader is not blamed on the account.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from leasegate.accounts import Account

StallPhase = Literal["first-token", "idle"]


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


class UpstreamStalled(Exception):
    """The upstream sent no body bytes within a deadline (names the phase and the seconds)."""

    def __init__(self, phase: StallPhase, seconds: float) -> None:
        super().__init__(f"no {phase} data from the upstream within {seconds:g} s")
        self.phase: StallPhase = phase
        self.seconds = seconds


class BodyReader:
    """Reads a response body chunk by chunk, each wait bounded by the right deadline."""

    __slots__ = ("_chunks", "_deadlines", "_first_token_at")

    def __init__(self, chunks: AsyncIterator[bytes], deadlines: Deadlines) -> None:
        self._chunks = chunks
        self._deadlines = deadlines
        self._first_token_at: float | None = None

    async def next(self, *, awaiting_first_token: bool = False) -> bytes | None:
        """The next chunk, or None at the end of the body. Raises `UpstreamStalled`, and
        httpx.TransportError when the connection fails."""
        loop = asyncio.get_running_loop()
        first_s = self._deadlines.first_token_s
        phase: StallPhase
        if awaiting_first_token and first_s is not None:
            # One deadline for the whole wait: chunks without an answer (a preamble event, a
            # keep-alive comment) do not push it back.
            if self._first_token_at is None:
                self._first_token_at = loop.time() + first_s
            when, phase, seconds = self._first_token_at, "first-token", first_s
        else:
            seconds = self._deadlines.idle_s
            when, phase = loop.time() + seconds, "idle"
        try:
            async with asyncio.timeout_at(when):
                return await anext(self._chunks, None)
        except TimeoutError:
            raise UpstreamStalled(phase, seconds) from None
