"""Mint decisions and hops as Prometheus counters, counted where the route answers.

Every mint, renewal and hop records exactly one decision (SPEC §3), refused or not; these
counters count the same decisions by outcome and refusal code. An idempotent replay answers
with an earlier decision and is not counted again. The tenant is a label only when
`LEASEGATE_METRICS_TENANT_LABEL` is set, and then only the first `MAX_TENANTS` tenants seen
get their own series; the rest share `other`, so a caller cannot grow the series without bound.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from leasegate.core.records import MintKind

MAX_TENANTS = 50
OTHER = "other"


class BoundedLabel:
    """Admits the first `limit` distinct values, then answers `other` for any new one."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self._limit:
            return OTHER
        self._seen.add(value)
        return value


class MintMetrics:
    def __init__(self, registry: CollectorRegistry, *, tenant_label: bool = False) -> None:
        self._tenant = BoundedLabel(MAX_TENANTS) if tenant_label else None
        labels = ["kind", "outcome", "code"] + (["tenant"] if tenant_label else [])
        self.decisions = Counter(
            "leasegate_mint_decisions",
            "Recorded mint decisions by kind (fresh, retry, supersede, renewal), outcome "
            "(selected, refused) and refusal code (`none` when selected).",
            labels,
            registry=registry,
        )
        self.hops = Counter(
            "leasegate_fallback_hops",
            "Mints citing an earlier decision (retry: a hop; supersede: a lost response), "
            "by outcome.",
            ["kind", "outcome"],
            registry=registry,
        )

    def decided(self, kind: MintKind, tenant: str, refusal_code: str | None) -> None:
        outcome = "refused" if refusal_code is not None else "selected"
        labels = [kind, outcome, refusal_code or "none"]
        if self._tenant is not None:
            labels.append(self._tenant(tenant))
        self.decisions.labels(*labels).inc()
        if kind in ("retry", "supersede"):
            self.hops.labels(kind, outcome).inc()
