"""The FastAPI application the control plane and the embedded gateway start from: the
common guard (`leasegate.web.app_base`), FastAPI's validation refusal as the envelope, and
FastAPI's own telemetry for the server spans when tracing is configured. The proxy process
never imports this module (`tests/unit/test_proxy_imports.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.telemetry import TelemetryConfig
from starlette.requests import Request
from starlette.responses import JSONResponse

from leasegate.config import Config
from leasegate.core.errors import GatewayError
from leasegate.web.app_base import guard
from leasegate.web.errors import error_response
from leasegate.web.tracing import configure_tracing

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

_FIELD_NAME = re.compile(r"[A-Za-z0-9_.]{1,64}")


def base_app(
    config: Config, *, title: str, service: str, lifespan: Lifespan, **options: Any
) -> FastAPI:
    configure_tracing(config.tracing_endpoint, service)
    app = FastAPI(
        title=title,
        lifespan=lifespan,
        telemetry=telemetry(config.tracing_endpoint),
        redirect_slashes=False,
        **options,
    )
    guard(app, config)
    app.add_exception_handler(RequestValidationError, _on_validation)
    return app


def telemetry(endpoint: str | None) -> TelemetryConfig:
    """FastAPI's own telemetry: request spans only when tracing is configured; never its
    metrics (Prometheus has ours) nor its logs (they would carry rejected input values)."""
    return {"tracing": endpoint is not None, "metrics": False, "logs": False}


async def _on_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for this type
    return error_response(GatewayError("invalid-request", describe_validation(exc)))


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
