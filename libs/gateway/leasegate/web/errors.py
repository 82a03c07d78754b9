"""One place that turns every refusal into the error envelope, for both services.

Starlette only: the proxy's app is a plain Starlette app (no FastAPI in its process). The
control plane adds FastAPI's validation refusal on top (`leasegate.control_plane.api_app`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match

from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.core.ports.errors import StoreError

log = logging.getLogger("leasegate.web")

_HTTP_CODES = {404: "not-found", 405: "method-not-allowed", 408: "request-timeout"}
_HTTP_MESSAGES = {404: "no such route", 405: "method not allowed on this route"}


def error_response(error: GatewayError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    merged = dict(headers or {})
    if error.retry_after_s is not None:
        merged["Retry-After"] = retry_after_header(error.retry_after_s)
    return JSONResponse(error.envelope(), status_code=error.status, headers=merged)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request, starlette_allow: str) -> str:
    """Every method some route of the app serves on this path. The router names only the
    methods of the first route whose path matched, so a path served by two routes
    (`GET` and `DELETE /keys/{id}`) would otherwise advertise one: each method is tried
    against every route (a route, or an included router, answers `FULL` for a method it
    serves on this path)."""
    methods = {m.strip() for m in starlette_allow.split(",") if m.strip()}
    for method in _METHODS:
        probe = {
            "type": "http",
            "method": method,
            "path": request.scope["path"],
            "root_path": request.scope.get("root_path", ""),
            "headers": [],
        }
        if any(r.matches(probe)[0] is Match.FULL for r in request.app.router.routes):
            methods.add(method)
    return ", ".join(sorted(methods))


def install_error_handlers(app: Starlette) -> None:
    """The envelope for a `GatewayError`, Starlette's HTTP refusals (404, 405 with `Allow`,
    408, 413), a failed store (503 `unavailable`) and anything else (500 `internal`, the
    exception logged but never sent)."""

    async def on_gateway_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)  # noqa: S101 - registered for this type only
        return error_response(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)  # noqa: S101 - registered for this type
        code = _HTTP_CODES.get(exc.status_code, "invalid-request")
        detail = _HTTP_MESSAGES.get(exc.status_code) or (
            exc.detail if isinstance(exc.detail, str) else "request refused"
        )
        # Keeps `Allow` on a 405 (and any other header Starlette sets on its refusals).
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request, headers.get("Allow", ""))
        return error_response(GatewayError(code, detail, status=exc.status_code), headers)

    async def on_store_error(request: Request, exc: Exception) -> JSONResponse:
        # A database or Redis that failed the call: a held 503 `unavailable`, never a 500.
        assert isinstance(exc, StoreError)  # noqa: S101 - registered for this type only
        log.error("store unavailable", extra={"path": request.url.path, "error": exc.reason})
        return error_response(
            GatewayError("unavailable", "a backing store is unavailable", retry_after_s=1.0)
        )

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "unhandled error",
            extra={"path": request.url.path, "error": type(exc).__name__},
            exc_info=exc,
        )
        return error_response(GatewayError("internal", "internal error"))

    app.add_exception_handler(GatewayError, on_gateway_error)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(StoreError, on_store_error)
    app.add_exception_handler(Exception, on_unexpected)
