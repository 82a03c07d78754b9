"""The proxy's Prometheus metrics, on a registry of its own (one per app: tests build many)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from leasegate.core.ports.health import HealthTransition
from leasegate.core.records import EvidenceRow

# LLM requests run from milliseconds (a refusal) to minutes (a long stream).
_SECONDS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "leasegate_proxy_requests",
            "Proxied requests by how they ended.",
            ["account", "model", "outcome", "qualifying"],
            registry=registry,
        )
        self.failures = Counter(
            "leasegate_upstream_failures",
            "Qualifying failures by scope, per account and served model.",
            ["account", "model", "scope"],
            registry=registry,
        )
        self.duration = Histogram(
            "leasegate_proxy_request_seconds",
            "Time from arrival to the end of the response or stream.",
            ["account", "model"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.ttfb = Histogram(
            "leasegate_proxy_ttfb_seconds",
            "Time from arrival to the first byte of the upstream's answer.",
            ["account", "model"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.tokens = Counter(
            "leasegate_proxy_tokens",
            "Tokens the upstream reported, by kind (input, output, cache_read, cache_creation).",
            ["account", "model", "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "leasegate_proxy_cost",
            "Cost the proxied requests' reported usage priced at, in the accounts file's "
            "currency. A float, for dashboards only: evidence rows hold the exact decimals.",
            ["account", "model"],
            registry=registry,
        )
        self.usage_estimated = Counter(
            "leasegate_proxy_usage_estimated",
            "Streams that never reported usage and were charged the gateway's estimate.",
            ["account", "model"],
            registry=registry,
        )
        self.refusals = Counter(
            "leasegate_proxy_refusals",
            "Requests the proxy refused itself, by error code (key-revoked, model-cooling, ...).",
            ["code"],
            registry=registry,
        )
        self.health_changes = Counter(
            "leasegate_health_transitions",
            "Cooldowns and circuits that opened or closed.",
            ["account", "model", "kind"],
            registry=registry,
        )

    def observe(self, row: EvidenceRow) -> None:
        account = row.account_id or "none"
        model = row.served_model or "none"
        self.requests.labels(account, model, row.outcome, str(row.qualifying).lower()).inc()
        if row.scope is not None:
            self.failures.labels(account, model, row.scope).inc()
        self.duration.labels(account, model).observe(row.duration_ms / 1000)
        if row.first_byte_ms is not None:
            self.ttfb.labels(account, model).observe(row.first_byte_ms / 1000)
        if row.refusal_reason is not None:
            self.refusals.labels(row.refusal_reason).inc()
        for kind, count in (
            ("input", row.input_tokens),
            ("output", row.output_tokens),
            ("cache_read", row.cache_read_input_tokens),
            ("cache_creation", row.cache_creation_input_tokens),
        ):
            if count:
                self.tokens.labels(account, model, kind).inc(count)
        if row.cost:
            self.cost.labels(account, model).inc(float(row.cost))
        if row.usage_estimated:
            self.usage_estimated.labels(account, model).inc()

    def health_transitions(self, transitions: Sequence[HealthTransition]) -> None:
        for t in transitions:
            self.health_changes.labels(t.account_id, t.model or "", t.kind).inc()
