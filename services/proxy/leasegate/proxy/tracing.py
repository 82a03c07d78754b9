"""A proxied request's spans, and the W3C trace headers an account may receive.

Tracing is decided once, at wiring: without `OTEL_EXPORTER_OTLP_ENDPOINT` the runtime has no
`RequestTracer` (`ProxyRuntime.tracer` is None) and `Admission.trace` stays None, so the request
path makes no span, reads no context and builds nothing per request. With it, each proxied
request that presented a key gets a `proxy.request` span, child of the framework's server span
(itself the child of the caller's `traceparent`), ended when the request ends
(`ProxyRuntime.finish`), with its steps as child spans:

    proxy.admit     key resolution (the cache, else the database)
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

The spans themselves (`RequestTracer`, `RequestTrace`) are in `proxy/spans.py`, imported only
when tracing is on, so an untraced proxy never loads OpenTelemetry; the caller's trace headers
load its W3C propagator on first use (an account with `propagate_trace` only).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, TypeVar

from leasegate.upstream.clients import UpstreamRequest

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import TextMapPropagator

    from leasegate.proxy.spans import RequestTrace

TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
"""The W3C trace context's headers."""

T = TypeVar("T")


def in_step(request: RequestTrace | None, name: str, work: Awaitable[T]) -> Awaitable[T]:
    """`work` inside a step span; untraced, `work` itself (nothing made, no extra frame)."""
    return work if request is None else request.run(name, work)


@functools.cache
def w3c() -> TextMapPropagator:
    """The W3C trace-context propagator, loaded on first use."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def caller_trace_headers(caller_headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The caller's own W3C trace headers, validated and re-encoded (none if invalid).
    `caller_headers`: lower-case names, as the ASGI scope has them."""
    sent: dict[str, str] = {}
    for name, value in caller_headers:
        if name in TRACE_HEADERS:
            sent.setdefault(name, value)
    if "traceparent" not in sent:
        return ()
    from opentelemetry.context import Context  # loaded once a caller sends a trace

    carrier: dict[str, str] = {}
    propagator = w3c()
    propagator.inject(carrier, context=propagator.extract(sent, context=Context()))
    return tuple(carrier.items())


def with_headers(request: UpstreamRequest, extra: tuple[tuple[str, str], ...]) -> UpstreamRequest:
    return dataclasses.replace(request, headers=request.headers + extra) if extra else request
