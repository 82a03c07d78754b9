"""The evidence writer's metrics: what is waiting, what was spilled, refused or lost."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class EvidenceMetrics:
    """Registered on `registry`; with None, on a private registry nobody scrapes (tests)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        target = registry if registry is not None else CollectorRegistry()
        self._queue = Gauge(
            "leasegate_evidence_queue_rows",
            "Evidence rows waiting in memory for the database.",
            registry=target,
        )
        self._spill_rows = Gauge(
            "leasegate_evidence_spill_rows",
            "Evidence rows waiting in the local spill file.",
            registry=target,
        )
        self._spill_bytes = Gauge(
            "leasegate_evidence_spill_bytes",
            "Size of the local spill file(s) still to be replayed.",
            registry=target,
        )
        self._dead_letter = Counter(
            "leasegate_evidence_dead_letter",
            "Evidence rows the database refused for their content (logged, not written).",
            registry=target,
        )
        self._dropped = Counter(
            "leasegate_evidence_dropped",
            "Evidence rows lost: memory bound reached with no usable spill file.",
            registry=target,
        )
        self._spill_failures = Counter(
            "leasegate_evidence_spill_failures",
            "Rows the spill file could not take (disk full or unwritable).",
            registry=target,
        )
        self._flush = Histogram(
            "leasegate_evidence_flush_seconds",
            "Time of one successful evidence write to the database.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=target,
        )

    def queued(self, rows: int) -> None:
        self._queue.set(rows)

    def spilled(self, rows: int, size_bytes: int) -> None:
        self._spill_rows.set(rows)
        self._spill_bytes.set(size_bytes)

    def spill_failed(self) -> None:
        self._spill_failures.inc()

    def dead_lettered(self) -> None:
        self._dead_letter.inc()

    def dropped(self) -> None:
        self._dropped.inc()

    def flushed(self, seconds: float) -> None:
        self._flush.observe(seconds)
