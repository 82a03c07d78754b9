"""A proxied request's spans, and the W3C trace headers an account may receive.

Tracing is decided once, at wiring: without `OTEL_EXPORTER_OTLP_ENDPOINT` the runtime has no
`RequestTracer` (`ProxyRuntime.tracer` is None) and `Attempt.trace` stays None, so the request
path makes no span, reads no context and builds nothing per request. With it, each proxied
request that presented a key gets a `proxy.request` span, child of the framework's server span
(itself the child of the caller's `traceparent`), ended when the request ends
(`ProxyRuntime.finish`), with its steps as child spans:

    proxy.admit     key resolution, the key's account and endpoint
    proxy.health    the health store's admission (cooldowns, open circuits, trials)
    proxy.slot      the account's request slot (accounts with a request ceiling only)
    proxy.upstream  a client span: from sending to the upstream's status line and headers
    proxy.finish    slot back, evidence row queued (or written), spend and health recorded

and two events on `proxy.request`: `first-token` (a stream's first answer-bearing event) and
`evidence` (`durable` true when the row was written before the caller could cite it). The
request span carries the request id, endpoint, account, served model, outcome and refusal
code; no span carries a header, a body, a key or a credential.

An upstream receives `traceparent` (and `tracestate`) only from an account with
`propagate_trace: true`: the `proxy.upstream` span's own, so the upstream's span is a child of
the proxy's. Untraced, such an account gets the caller's trace headers, checked and
re-encoded by the W3C propagator (an invalid one is dropped). No other account ever does: the
caller's headers are allow-listed (upstream/caller_headers.py) and these are not on the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Iterable
from contextlib import AbstractContextManager
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from leasegate.core.records import EvidenceRow
from leasegate.upstream.clients import UpstreamClients, UpstreamRequest, UpstreamResponse

_W3C = TraceContextTextMapPropagator()
_TRACE_HEADERS = frozenset(_W3C.fields)  # traceparent, tracestate
_UPSTREAM_FAILED = frozenset({"in-stream-error", "upstream-error", "timeout", "connect-error"})

T = TypeVar("T")


def in_step(request: RequestTrace | None, name: str, work: Awaitable[T]) -> Awaitable[T]:
    """`work` inside a step span; untraced, `work` itself (nothing made, no extra frame)."""
    return work if request is None else request.run(name, work)


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
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return tuple(carrier.items())


def caller_trace_headers(caller_headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The caller's own W3C trace headers, validated and re-encoded (none if invalid).
    `caller_headers`: lower-case names, as the ASGI scope has them."""
    sent: dict[str, str] = {}
    for name, value in caller_headers:
        if name in _TRACE_HEADERS:
            sent.setdefault(name, value)
    if "traceparent" not in sent:
        return ()
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=_W3C.extract(sent, context=Context()))
    return tuple(carrier.items())


def with_headers(request: UpstreamRequest, extra: tuple[tuple[str, str], ...]) -> UpstreamRequest:
    return dataclasses.replace(request, headers=request.headers + extra) if extra else request
