"""Refuse oversized request bodies before anything parses them (413 `invalid-request`).

A body whose declared `Content-Length` is over the limit, or that grows past it while being
read (chunked), makes the route's first read past the limit raise `BodyTooLarge`, an HTTP
413 exception (the declared length is checked at the first read, so the proxy has admitted
the key by then and records the refusal like any other). FastAPI's own body parsing re-raises
HTTP exceptions unchanged (anything else would become a 400); the proxy turns it into its
413 refusal and evidence row.
The rest of the body is drained first (up to a bound), so a client still sending sees the
413 instead of a broken pipe.

The same wrapper gives body reads an idle deadline: while the body is incomplete, each read
waits at most `idle_timeout_s` for the next bytes (a body shorter than its `Content-Length`,
or a trickle), then raises `BodyReadTimeout`, an HTTP 408 exception (`request-timeout`,
`Connection: close`). Once the body is complete, reads (Starlette's disconnect listener) pass
through untouched.
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
    def __init__(self, idle_s: float) -> None:
        super().__init__(
            408, f"no request body bytes arrived for {idle_s:g} s", {"Connection": "close"}
        )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int, idle_timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.idle_timeout_s = idle_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared_too_big = any(
            name == b"content-length" and _too_big(value, self.max_bytes)
            for name, value in scope.get("headers", ())
        )
        guarded = _GuardedReceive(receive, self.max_bytes, self.idle_timeout_s)
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
    """`receive` with the size cap and, while the body is incomplete, the idle deadline."""

    def __init__(self, receive: Receive, max_bytes: int, idle_s: float | None) -> None:
        self._receive = receive
        self._max_bytes = max_bytes
        self._idle_s = idle_s
        self._received = 0
        self._body_done = False
        self.declared_too_big = False

    async def __call__(self) -> Message:
        if self.declared_too_big and not self._body_done:
            self._body_done = True
            await _drain(self._receive, self._max_bytes, self._idle_s)
            raise BodyTooLarge(self._max_bytes)
        if self._body_done or self._idle_s is None:
            message = await self._receive()
        else:
            try:
                async with asyncio.timeout(self._idle_s):
                    message = await self._receive()
            except TimeoutError:
                raise BodyReadTimeout(self._idle_s) from None
        more = message["type"] == "http.request" and message.get("more_body", False)
        self._body_done = self._body_done or not more
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._max_bytes:
                if more:
                    await _drain(self._receive, self._max_bytes, self._idle_s)
                raise BodyTooLarge(self._max_bytes)
        return message


async def _drain(receive: Receive, limit: int, idle_s: float | None) -> None:
    """Read and discard the rest of the body (up to a bound, and while it keeps coming), so
    that the client, still sending, sees the 413 instead of a broken pipe."""
    budget = 8 * limit
    while budget > 0:
        try:
            async with asyncio.timeout(idle_s):
                message = await receive()
        except TimeoutError:
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
