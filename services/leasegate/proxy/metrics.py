"""The proxy's Prometheus metrics, on a registry of its own (one per app: tests build many)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from leasegate.core.ports.health import HealthTransition
from leasegate.core.records import EvidenceRow


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
            ["account"],
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
        self.duration.labels(account).observe(row.duration_ms / 1000)

    def health_transitions(self, transitions: Sequence[HealthTransition]) -> None:
        for t in transitions:
            self.health_changes.labels(t.account_id, t.model or "", t.kind).inc()
