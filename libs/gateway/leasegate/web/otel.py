"""The OpenTelemetry SDK and its OTLP/HTTP exporter: imported only with the `otel` extra."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def use_otlp(endpoint: str, service: str) -> None:
    """Export spans to `endpoint` (the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
    means it), unless the process already has a tracer provider (e.g. one installed by
    `opentelemetry-instrument`), which is then kept."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    traces = endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    trace.set_tracer_provider(provider)
