"""OpenTelemetry tracing, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

FastAPI traces each request itself once a tracer provider exists: a server span named after
the route, child of the caller's W3C `traceparent`. This module only decides whether it may
(`telemetry`), installs the SDK with an OTLP/HTTP exporter when an endpoint is configured
(`configure_tracing`, which needs the `otel` extra), and lets a service mark the steps of a
request as child spans (`step`), which cost nothing while no provider is installed.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

from fastapi.telemetry import TelemetryConfig
from opentelemetry import trace

try:
    from leasegate.web import otel
except ImportError:  # the `otel` extra is not installed: spans can be made, not exported
    otel = None  # type: ignore[assignment]  # a module or nothing, checked before use

log = logging.getLogger("leasegate.tracing")

_TRACER = trace.get_tracer("leasegate")


def telemetry(endpoint: str | None) -> TelemetryConfig:
    """FastAPI's own telemetry: request spans only when tracing is configured; never its
    metrics (Prometheus has ours) nor its logs (they would carry rejected input values)."""
    return {"tracing": endpoint is not None, "metrics": False, "logs": False}


def configure_tracing(endpoint: str | None, service: str) -> bool:
    """Install the OTLP exporter when an endpoint is set; whether spans will be exported."""
    if endpoint is None:
        return False
    if otel is None:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed")
        return False
    otel.use_otlp(endpoint, service)
    return True


def step(name: str) -> AbstractContextManager[trace.Span]:
    """A child span of the current request's span (a no-op span without a provider)."""
    return _TRACER.start_as_current_span(name)
