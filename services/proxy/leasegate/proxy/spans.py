"""A traced request's spans (see `proxy/tracing.py` for what is traced and why). Imported only
when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: an untraced proxy never loads OpenTelemetry."""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AbstractContextManager
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from leasegate.core.records import EvidenceRow
from leasegate.proxy.tracing import w3c, with_headers
from leasegate.upstream.clients import UpstreamClients, UpstreamRequest, UpstreamResponse

_UPSTREAM_FAILED = frozenset({"in-stream-error", "upstream-error", "timeout", "connect-error"})

T = TypeVar("T")


class RequestTracer:
    """Starts each proxied request's span; one per process, made only when tracing is on."""

    __slots__ = ("_tracer",)

    def __init__(self) -> None:
        self._tracer = trace.get_tracer("leasegate.proxy")

    def begin(self, request_id: str, endpoint: str) -> RequestTrace:
        """A `proxy.request` span, child of the current span (the server span)."""
        span = self._tracer.start_span(
            "proxy.request",
            attributes={"leasegate.request_id": request_id, "leasegate.endpoint": endpoint},
        )
        return RequestTrace(self._tracer, span)


class RequestTrace:
    """One request's span and its steps (see the module docstring)."""

    __slots__ = ("_context", "_first_token", "_tracer", "span")

    def __init__(self, tracer: trace.Tracer, span: Span) -> None:
        self._tracer = tracer
        self.span = span
        self._context = trace.set_span_in_context(span)
        self._first_token = False

    def step(self, name: str, *, client: bool = False) -> AbstractContextManager[Span]:
        """A child span of the request's, current while the step runs. A refusal raised in
        it is not recorded as an exception (the request span names its code)."""
        return self._tracer.start_as_current_span(
            name,
            context=self._context,
            kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
            record_exception=False,
            set_status_on_exception=False,
        )

    async def run(self, name: str, work: Awaitable[T]) -> T:
        with self.step(name):
            return await work

    async def send(
        self, clients: UpstreamClients, request: UpstreamRequest, *, propagate: bool
    ) -> UpstreamResponse:
        """Send inside the `proxy.upstream` client span, which the upstream sees as its
        parent when the account propagates traces."""
        with self.step("proxy.upstream", client=True) as span:
            if propagate:
                request = with_headers(request, trace_headers(span))
            response = await clients.send(request)
            span.set_attribute("http.response.status_code", response.status)
            return response

    def first_token(self) -> None:
        if not self._first_token:
            self._first_token = True
            self.span.add_event("first-token")

    def evidence(self, *, durable: bool) -> None:
        self.span.add_event("evidence", {"leasegate.evidence.durable": durable})

    def end(self, row: EvidenceRow) -> None:
        """The request is over: its row's facts on the span, then the span ends."""
        span = self.span
        span.set_attribute("leasegate.outcome", row.outcome)
        for name, value in (
            ("leasegate.account", row.account_id),
            ("leasegate.served_model", row.served_model),
            ("leasegate.refusal_code", row.refusal_reason),
            ("leasegate.upstream_status", row.upstream_status),
        ):
            if value is not None:
                span.set_attribute(name, value)
        if row.outcome in _UPSTREAM_FAILED:
            span.set_status(Status(StatusCode.ERROR))
        span.end()


def trace_headers(span: Span) -> tuple[tuple[str, str], ...]:
    """`traceparent` (and `tracestate`) naming `span` as the parent."""
    carrier: dict[str, str] = {}
    w3c().inject(carrier, context=trace.set_span_in_context(span))
    return tuple(carrier.items())
