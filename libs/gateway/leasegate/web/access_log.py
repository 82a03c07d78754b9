"""Access logs: one JSON line per HTTP request, on both services.

A plain ASGI wrapper, so any ASGI callable (a FastAPI app or a framework-free one) can be
wrapped the same way: `AccessLog(app)`. The line carries the method, the path (never the
query), the status, the duration, the request id, the key id and the account. It never
carries a key's secret, a credential, a body or a header value other than those ids:

- the request id is the response's `x-leasegate-request-id` (the proxy sets it); a response
  without one gets a fresh id, added to its headers, so every line can be matched to a reply;
- the key id is the public first part of a Leasegate key presented in any of the headers the
  proxy takes one in (`leasegate.providers.presented_key`; the secret part is discarded by
  `parse_key`);
- the account is the response's `x-leasegate-account`.

A request that ends without a response (the client went away) is logged with status 0.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from leasegate.core.clock import new_id
from leasegate.keys import parse_key
from leasegate.providers import presented_key
from leasegate.wire.headers import ACCOUNT_HEADER, REQUEST_ID_HEADER

log = logging.getLogger("leasegate.access")

_REQUEST_ID = REQUEST_ID_HEADER.encode()
_ACCOUNT = ACCOUNT_HEADER.encode()


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen: dict[str, Any] = {"status": 0, "request_id": None, "account": None}

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                _note_response(message, seen)
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            log.info(
                "request",
                extra={
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": seen["status"],
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    "request_id": seen["request_id"],
                    "key_id": presented_key_id(scope),
                    "account": seen["account"],
                },
            )


def _note_response(message: Message, seen: dict[str, Any]) -> None:
    seen["status"] = message["status"]
    headers = list(message.get("headers", ()))
    for name, value in headers:
        lowered = name.lower()
        if lowered == _REQUEST_ID:
            seen["request_id"] = value.decode("latin-1")
        elif lowered == _ACCOUNT:
            seen["account"] = value.decode("latin-1")
    if seen["request_id"] is None:
        request_id = new_id("req")
        seen["request_id"] = request_id
        headers.append((_REQUEST_ID, request_id.encode()))
        message["headers"] = headers


def presented_key_id(scope: Scope) -> str | None:
    """The key id of a Leasegate key in the request's headers; None for anything else."""
    token = presented_key(scope.get("headers", ()))
    parsed = parse_key(token) if token is not None else None
    return parsed.key_id if parsed is not None else None
