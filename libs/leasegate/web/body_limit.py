"""Refuse oversized request bodies before anything parses them (413 `invalid-request`)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from leasegate.core.errors import GatewayError


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and _too_big(value, self.max_bytes):
                await drain_body(receive, self.max_bytes)
                await refuse_too_large(send, self.max_bytes)
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await drain_body(receive, self.max_bytes)
                await refuse_too_large(send, self.max_bytes)


async def drain_body(receive: Receive, limit: int) -> None:
    """Read and discard the rest of the body (up to a bound), so that the client, still
    sending, sees the 413 instead of a broken pipe."""
    budget = 8 * limit
    while budget > 0:
        message = await receive()
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


async def refuse_too_large(send: Send, limit: int) -> None:
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
