"""The proxy's server spans: it is a plain Starlette app, with no framework to make them.
Imported only when tracing is configured (`leasegate.web.app_base`)."""

from __future__ import annotations

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
"""A span is named after one of these, or `HTTP` with the method `_OTHER` (as the semantic
conventions say: a caller cannot invent span names)."""


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
