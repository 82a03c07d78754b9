"""OpenTelemetry tracing, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

A request's server span, child of the caller's W3C `traceparent`, is made by the framework
where there is one (FastAPI's own telemetry on the control plane and the embedded gateway,
`leasegate.control_plane.api_app`) and by `ServerSpans` (`leasegate.web.server_spans`) on the
proxy, a plain Starlette app. This module installs the SDK with an OTLP/HTTP exporter when an
endpoint is configured (`configure_tracing`, which needs the `otel` extra) and lets a service
mark the steps of a request as child spans (`step`), which cost nothing while no provider is
installed. Nothing here loads OpenTelemetry until it is used.
"""

from __future__ import annotations

import functools
import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("leasegate.tracing")


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


@functools.cache
def _tracer() -> Tracer:
    # OpenTelemetry's API is loaded by the first step, not by importing this module: the
    # proxy imports it and, untraced, never makes a span
    from opentelemetry import trace

    return trace.get_tracer("leasegate")


def step(name: str) -> AbstractContextManager[Span]:
    """A child span of the current request's span (a no-op span without a provider)."""
    return _tracer().start_as_current_span(name)
