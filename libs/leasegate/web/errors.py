"""One place that turns every refusal into the error envelope, for both services."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.core.ports.errors import StoreError

log = logging.getLogger("leasegate.web")

_HTTP_CODES = {404: "not-found", 405: "method-not-allowed", 408: "request-timeout"}
_HTTP_MESSAGES = {404: "no such route", 405: "method not allowed on this route"}
_FIELD_NAME = re.compile(r"[A-Za-z0-9_.]{1,64}")


def error_response(error: GatewayError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    merged = dict(headers or {})
    if error.retry_after_s is not None:
        merged["Retry-After"] = retry_after_header(error.retry_after_s)
    return JSONResponse(error.envelope(), status_code=error.status, headers=merged)


def describe_validation(exc: RequestValidationError) -> str:
    """A short account of the first problem, naming the field but never echoing its value."""
    errors = exc.errors()
    if not errors:
        return "the request is not valid"
    first = errors[0]
    location = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    if not _FIELD_NAME.fullmatch(location):
        location = "a field"  # a caller-chosen name is echoed only when it is a plain one
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        return "the body is not valid JSON"
    if kind == "extra_forbidden":
        return f"unknown field {location!r}"
    if kind == "missing":
        return f"missing field {location!r}"
    message = str(first.get("msg", "invalid value"))
    return f"{location}: {message}" if location else message


def install_error_handlers(app: FastAPI) -> None:
    async def on_gateway_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)  # noqa: S101 - registered for this type only
        return error_response(exc)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for this type
        return error_response(GatewayError("invalid-request", describe_validation(exc)))

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)  # noqa: S101 - registered for this type
        code = _HTTP_CODES.get(exc.status_code, "invalid-request")
        detail = _HTTP_MESSAGES.get(exc.status_code) or (
            exc.detail if isinstance(exc.detail, str) else "request refused"
        )
        # Keeps `Allow` on a 405 (and any other header Starlette sets on its refusals).
        return error_response(GatewayError(code, detail, status=exc.status_code), exc.headers)

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
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(StoreError, on_store_error)
    app.add_exception_handler(Exception, on_unexpected)
