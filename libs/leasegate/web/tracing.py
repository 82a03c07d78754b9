"""OpenTelemetry tracing, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

A request's server span, child of the caller's W3C `traceparent`, is made by the framework
where there is one (FastAPI's own telemetry on the control plane and the embedded gateway,
`leasegate.web.api_app`) and by `ServerSpans` on the proxy, a plain Starlette app. This module
installs the SDK with an OTLP/HTTP exporter when an endpoint is configured
(`configure_tracing`, which needs the `otel` extra), makes the proxy's server spans, and lets
a service mark the steps of a request as child spans (`step`), which cost nothing while no
provider is installed.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("leasegate.tracing")

_TRACER = trace.get_tracer("leasegate")

_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
"""A span is named after one of these, or `HTTP` with the method `_OTHER` (as the semantic
conventions say: a caller cannot invent span names)."""


def configure_tracing(endpoint: str | None, service: str) -> bool:
    """Install the OTLP exporter when an endpoint is set; whether spans will be exported.
    The SDK and its exporter (protobuf) are imported only then: an untraced process never
    loads them."""
    if endpoint is None:
        return False
    try:
        from leasegate.web import otel  # only when tracing is configured
    except ImportError:  # the `otel` extra is not installed: spans can be made, not exported
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed")
        return False
    otel.use_otlp(endpoint, service)
    return True


def step(name: str) -> AbstractContextManager[trace.Span]:
    """A child span of the current request's span (a no-op span without a provider)."""
    return _TRACER.start_as_current_span(name)


class ServerSpans:
    """ASGI middleware: one `SERVER` span per HTTP request, as FastAPI's telemetry makes them
    (so both services' traces read alike): the child of the caller's `traceparent` (a missing
    or invalid one starts a trace), current while the app runs (the service's own spans are
    its children), named `METHOD /route/template` once the router has matched a route (the
    method alone otherwise), with the status, and ended when the last body byte is sent (or
    the app fails). It carries no header value, query, body or key.

    Installed only when tracing is configured, so an untraced request pays nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._tracer = trace.get_tracer("leasegate.web")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        known = scope["method"] in _METHODS
        method = scope["method"] if known else "HTTP"
        carrier: dict[str, str] = {}
        for name, value in scope["headers"]:
            carrier.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        parent = propagate.extract(carrier)
        span = self._tracer.start_span(
            method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method if known else "_OTHER",
                "url.scheme": scope.get("scheme", "http"),
                "url.path": scope["path"],
            },
        )
        ending = _Ending(span, scope, method)

        async def observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                ending.status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ending.end(None)

        token = context.attach(trace.set_span_in_context(span, parent))
        try:
            await self.app(scope, receive, observed)
        except BaseException as exc:
            ending.end(exc)
            raise
        finally:
            context.detach(token)
            ending.end(None)


class _Ending:
    """Ends one server span once, with what is known by then."""

    __slots__ = ("_done", "_method", "_scope", "span", "status")

    def __init__(self, span: trace.Span, scope: Scope, method: str) -> None:
        self.span = span
        self._scope = scope
        self._method = method
        self._done = False
        self.status: int | None = None

    def end(self, error: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        span = self.span
        route = getattr(self._scope.get("route"), "path", None)
        if isinstance(route, str):
            span.update_name(f"{self._method} {route}")
            span.set_attribute("http.route", route)
        if self.status is not None:
            span.set_attribute("http.response.status_code", self.status)
        if error is not None or self.status is None or self.status >= 500:
            failure = str(self.status or "incomplete_response")
            span.set_attribute("error.type", type(error).__name__ if error else failure)
            span.set_status(StatusCode.ERROR)
        span.end()
