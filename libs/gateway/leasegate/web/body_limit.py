"""Refuse oversized request bodies before anything parses them (413 `invalid-request`).

A body whose declared `Content-Length` is over the limit, or that grows past it while being
read (chunked), makes the route's first read past the limit raise `BodyTooLarge`, an HTTP
413 exception (the declared length is checked at the first read, so the proxy has admitted
the key by then and records the refusal like any other). FastAPI's own body parsing re-raises
HTTP exceptions unchanged (anything else would become a 400); the proxy turns it into its
413 refusal and evidence row.
The rest of the body is drained first (up to a bound), so a client still sending sees the
413 instead of a broken pipe.

The same wrapper gives body reads two deadlines, both raising `BodyReadTimeout`, an HTTP 408
exception (`request-timeout`, `Connection: close`):

- an idle deadline: while the body is incomplete, each read waits at most `idle_timeout_s`
  for the next bytes (a body shorter than its `Content-Length`, a client that stopped);
- a total deadline: the whole body must have arrived `total_timeout_s` after the request's
  headers did (the application is called then), however it trickles in: a byte every few
  seconds never trips the idle deadline, and would otherwise hold the request for as long as
  the client likes.

Once the body is complete, reads (Starlette's disconnect listener) pass through untouched.
"""

from __future__ import annotations

import asyncio
import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from leasegate.core.errors import GatewayError


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body exceeds {limit} bytes", {"Connection": "close"})
        self.limit = limit


class BodyReadTimeout(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(408, detail, {"Connection": "close"})


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        idle_timeout_s: float | None = None,
        total_timeout_s: float | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.idle_timeout_s = idle_timeout_s
        self.total_timeout_s = total_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared_too_big = any(
            name == b"content-length" and _too_big(value, self.max_bytes)
            for name, value in scope.get("headers", ())
        )
        guarded = _GuardedReceive(
            receive, self.max_bytes, self.idle_timeout_s, self.total_timeout_s
        )
        guarded.declared_too_big = declared_too_big
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, guarded, tracking_send)
        except BodyTooLarge:
            if not started:
                await _refuse(send, self.max_bytes)


class _GuardedReceive:
    """`receive` with the size cap and, while the body is incomplete, the idle and total
    deadlines (the total one counted from now: the request's headers are complete)."""

    def __init__(
        self, receive: Receive, max_bytes: int, idle_s: float | None, total_s: float | None
    ) -> None:
        self._receive = receive
        self._max_bytes = max_bytes
        self._idle_s = idle_s
        self._total_s = total_s
        self._due = None if total_s is None else asyncio.get_running_loop().time() + total_s
        self._received = 0
        self._body_done = False
        self.declared_too_big = False

    async def __call__(self) -> Message:
        if self.declared_too_big and not self._body_done:
            self._body_done = True
            await self._drain()
            raise BodyTooLarge(self._max_bytes)
        if self._body_done:
            return await self._receive()
        message = await self._next_part()
        more = message["type"] == "http.request" and message.get("more_body", False)
        self._body_done = not more
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._max_bytes:
                if more:
                    await self._drain()
                raise BodyTooLarge(self._max_bytes)
        return message

    async def _next_part(self) -> Message:
        """The next message of an incomplete body, within both deadlines."""
        wait = self._idle_s
        if self._due is not None:
            left = self._due - asyncio.get_running_loop().time()
            if left <= 0:
                raise self._total_expired()
            wait = left if wait is None else min(wait, left)
        if wait is None:
            return await self._receive()
        try:
            async with asyncio.timeout(wait):
                return await self._receive()
        except TimeoutError:
            if wait == self._idle_s:
                raise BodyReadTimeout(
                    f"no request body bytes arrived for {self._idle_s:g} s"
                ) from None
            raise self._total_expired() from None

    def _total_expired(self) -> BodyReadTimeout:
        return BodyReadTimeout(f"the request body did not arrive within {self._total_s:g} s")

    async def _drain(self) -> None:
        """Read and discard the rest of the body (up to a bound, and while it keeps coming
        within the deadlines), so that the client, still sending, sees the 413 instead of a
        broken pipe."""
        budget = 8 * self._max_bytes
        while budget > 0:
            try:
                message = await self._next_part()
            except BodyReadTimeout:
                return
            if message["type"] != "http.request":
                return
            budget -= len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _too_big(value: bytes, limit: int) -> bool:
    try:
        return int(value) > limit
    except ValueError:
        return False


async def _refuse(send: Send, limit: int) -> None:
    error = GatewayError("invalid-request", f"the body exceeds {limit} bytes", status=413)
    body = json.dumps(error.envelope()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
