"""The tenant label of the mint metrics: off by default, bounded when on."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from leasegate.control_plane.mint_metrics import MAX_TENANTS, OTHER, BoundedLabel, MintMetrics


def test_a_bounded_label_admits_the_first_values_then_answers_other() -> None:
    label = BoundedLabel(2)
    assert [label(v) for v in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]


def test_tenant_series_stop_growing_at_the_bound() -> None:
    registry = CollectorRegistry()
    metrics = MintMetrics(registry, tenant_label=True)
    for n in range(MAX_TENANTS + 20):
        metrics.decided("fresh", f"tenant-{n}", None)
    tenants = {
        s.labels["tenant"]
        for family in registry.collect()
        if family.name == "leasegate_mint_decisions"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert len(tenants) == MAX_TENANTS + 1
    assert OTHER in tenants
    other = registry.get_sample_value(
        "leasegate_mint_decisions_total",
        {"kind": "fresh", "outcome": "selected", "code": "none", "tenant": OTHER},
    )
    assert other == 20
