"""The gauges a scrape reads, over in-memory twins: each account's leases and request slots
against its ceilings, and each budgeted tenant's spend fraction (`tests/fixtures/reads.py`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from leasegate.audit import BudgetFields
from leasegate.control_plane.metrics import CapacityGauges
from leasegate.control_plane.tenant_metrics import TenantBudgetGauges
from tests.fixtures.control import T0
from tests.fixtures.reads import reads


async def test_capacity_gauges_count_leases_and_only_the_slots_of_ceilinged_accounts() -> None:
    r = reads()
    metrics = CollectorRegistry()
    gauges = CapacityGauges(r.accounts, metrics)
    await r.served("acme", "a", "r1", tokens=1, cost=None)
    await r.served("acme", "b", "r2", tokens=1, cost=None)
    await r.slots.acquire("a", "req-1", 4, T0.timestamp())
    await gauges.refresh()

    def sample(name: str, account: str) -> float | None:
        return metrics.get_sample_value(name, {"account": account})

    assert sample("leasegate_account_leases_held", "a") == 1
    assert sample("leasegate_account_leases_held", "b") == 1
    assert sample("leasegate_account_requests_in_flight", "a") == 1
    assert sample("leasegate_account_requests_in_flight", "b") is None  # not counted
    assert sample("leasegate_account_request_capacity", "a") == 4
    assert sample("leasegate_account_request_capacity", "b") is None


async def test_the_budget_gauge_shows_each_budgeted_tenants_fraction_until_cleared() -> None:
    r = reads()
    metrics = CollectorRegistry()
    gauges = TenantBudgetGauges(r.tenants, metrics)
    await r.operator_budgets(BudgetFields("acme", "month", max_tokens=200))
    await r.tenant_spends("acme", 50)
    await gauges.refresh()
    labels = {"tenant": "acme", "period": "month"}
    assert metrics.get_sample_value("leasegate_tenant_budget_spent_fraction", labels) == 0.25
    await r.operator_budgets(BudgetFields("acme"))
    await gauges.refresh()
    assert metrics.get_sample_value("leasegate_tenant_budget_spent_fraction", labels) is None
