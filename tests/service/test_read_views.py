"""What an operator reads from the control plane, over in-memory twins: the usage report's
groups and window, the accounts view's states, counts and today's spend, the tenant views'
budgets and spend, and the decision and evidence reads. Each view is called with the
dependency object the runtime hands its route (`tests/fixtures/reads.py`)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from leasegate.audit import BudgetFields
from leasegate.control_plane.accounts import accounts_view
from leasegate.control_plane.decisions import decision_read, dispatch_decisions, evidence_list
from leasegate.control_plane.tenant_views import budgets_view, tenant_view
from leasegate.control_plane.usage import usage_report
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from tests.fixtures.control import SERVED, T0
from tests.fixtures.reads import YESTERDAY, Reads, reads


@pytest.fixture
def r() -> Reads:
    return reads()


# -- usage ----------------------------------------------------------------------------------


async def test_usage_groups_todays_rows_by_tenant_and_account_in_the_accounts_currency(
    r: Reads,
) -> None:
    await r.served("acme", "a", "r1", tokens=10, cost="0.50")
    await r.served("acme", "a", "r2", tokens=20, cost="1.25")
    await r.served("acme", "b", "r3", tokens=5, cost=None)  # b has no prices
    await r.served("globex", "a", "r4", tokens=7, cost="0.25")
    await r.served("globex", "a", "r0", tokens=1000, cost="99", at=YESTERDAY)  # not today
    report = await usage_report(r.usage, group_by="tenant,account")
    assert report.currency == "EUR"
    assert report.since == T0.replace(hour=0)  # today (UTC) so far, by default
    seen = [(g.tenant, g.account, g.requests, g.input_tokens, g.cost) for g in report.usage]
    assert seen == [
        ("acme", "a", 2, 30, Decimal("1.75")),
        ("acme", "b", 1, 5, None),
        ("globex", "a", 1, 7, Decimal("0.25")),
    ]
    assert report.next_offset is None
    shown = report.model_dump(mode="json")["usage"][0]  # a group shows only what was asked
    assert "model" not in shown
    assert "day" not in shown
    assert shown["cost"] == "1.75"


async def test_a_full_usage_page_names_the_next_offset_and_the_next_page_follows(
    r: Reads,
) -> None:
    for n, tenant in enumerate(["t1", "t2", "t3"]):
        await r.served(tenant, "a", f"r{n}", tokens=1, cost=None)
    first = await usage_report(r.usage, group_by="tenant", limit=2)
    assert [g.tenant for g in first.usage] == ["t1", "t2"]
    assert first.next_offset == 2
    rest = await usage_report(r.usage, group_by="tenant", limit=2, offset=2)
    assert ([g.tenant for g in rest.usage], rest.next_offset) == (["t3"], None)


async def test_usage_over_an_explicit_window_by_day(r: Reads) -> None:
    await r.served("acme", "a", "r1", tokens=1, cost=None, at=YESTERDAY)
    await r.served("acme", "a", "r2", tokens=1, cost=None)
    report = await usage_report(
        r.usage, since="2025-12-31T00:00:00Z", until="2026-01-02T00:00:00+00:00", group_by="day"
    )
    assert [(g.day, g.requests) for g in report.usage] == [("2025-12-31", 1), ("2026-01-01", 1)]


@pytest.mark.parametrize(
    ("window", "group_by"),
    [
        ({"since": "2026-01-01T10:00:00Z", "until": "2026-01-01T09:00:00Z"}, "account"),
        ({"since": "2026-01-01T10:00:00"}, "account"),  # no zone
        ({"since": "1767261600"}, "account"),  # a bare number is not a time
        ({}, "account,account"),
        ({}, "tenant,region"),
    ],
)
async def test_a_window_or_grouping_that_cannot_be_read_is_an_invalid_request(
    r: Reads, window: dict[str, str], group_by: str
) -> None:
    with pytest.raises(GatewayError) as refused:
        await usage_report(r.usage, window.get("since"), window.get("until"), group_by=group_by)
    assert refused.value.code == "invalid-request"


# -- accounts -------------------------------------------------------------------------------


async def test_the_accounts_view_shows_states_leases_slots_cooling_and_spend_today(
    r: Reads,
) -> None:
    await r.operator_sets("b", "draining")
    await r.served("acme", "a", "r1", tokens=10, cost="0.50")
    await r.served("acme", "a", "r2", tokens=20, cost="0.25")
    await r.slots.acquire("a", "req-1", 4, T0.timestamp())
    r.health.cooling[("b", SERVED)] = Cooldown("b", SERVED, T0.timestamp() + 60, "upstream-5xx", 1)
    view = await accounts_view(r.accounts)
    a, b = view.accounts
    assert (view.revision, view.chain) == (1, "ok")
    assert (a.id, a.admin_state, a.leases_held, a.requests_in_flight) == ("a", "enabled", 2, 1)
    assert (a.spend_today.requests, a.spend_today.input_tokens) == (2, 30)
    assert a.spend_today.cost == Decimal("0.75")
    assert (b.id, b.admin_state, b.leases_held) == ("b", "draining", 0)
    assert b.requests_in_flight is None  # no request ceiling: the proxy counts nothing
    assert [c.model for c in b.cooling_models] == [SERVED]
    assert (b.spend_today.requests, b.spend_today.cost) == (0, None)


async def test_today_s_spend_is_read_at_most_every_30_seconds(r: Reads) -> None:
    await r.served("acme", "a", "r1", tokens=10, cost=None)
    assert (await accounts_view(r.accounts, only="a")).accounts[0].spend_today.requests == 1
    await r.served("acme", "a", "r2", tokens=10, cost=None)
    r.clock.advance(29)
    assert (await accounts_view(r.accounts, only="a")).accounts[0].spend_today.requests == 1
    r.clock.advance(2)
    assert (await accounts_view(r.accounts, only="a")).accounts[0].spend_today.requests == 2


async def test_while_the_chain_is_corrupt_no_account_state_is_vouched_for(r: Reads) -> None:
    await r.operator_sets("a", "disabled")
    r.chain.tamper(1, state="enabled")
    view = await accounts_view(r.accounts)
    assert view.chain == "corrupt"
    assert [a.admin_state for a in view.accounts] == ["unknown", "unknown"]


async def test_one_account_or_none(r: Reads) -> None:
    assert [a.id for a in (await accounts_view(r.accounts, only="b")).accounts] == ["b"]
    assert (await accounts_view(r.accounts, only="zz")).accounts == ()


# -- tenants --------------------------------------------------------------------------------


async def test_a_tenants_view_shows_its_budget_and_this_periods_spend(r: Reads) -> None:
    await r.operator_budgets(BudgetFields("acme/web", "day", max_tokens=1000, max_cost="2"))
    await r.tenant_spends("acme/web", 600, 500_000_000)  # 600 tokens, 0.50 EUR
    view = await tenant_view(r.tenants, "acme/web")
    assert (view.revision, view.chain, view.currency) == (1, "ok", "EUR")
    assert view.budget is not None
    assert (view.budget.period, view.budget.max_tokens) == ("day", 1000)
    assert view.spent is not None
    assert (view.spent.tokens, view.spent.cost) == (600, Decimal("0.5"))
    assert view.spent.fraction == pytest.approx(0.6)  # the larger of 600/1000 and 0.5/2
    assert not view.spent.exhausted
    assert view.spent.period_start == T0.replace(hour=0)
    await r.tenant_spends("acme/web", 400)
    spent = (await tenant_view(r.tenants, "acme/web")).spent
    assert spent is not None
    assert spent.exhausted
    assert spent.fraction == pytest.approx(1.0)


async def test_a_tenant_without_a_budget_reads_as_none_and_is_not_listed(r: Reads) -> None:
    await r.operator_budgets(BudgetFields("zeta", "month", max_tokens=5))
    await r.operator_budgets(BudgetFields("alpha", "day", max_cost="1"))
    view = await tenant_view(r.tenants, "acme")
    assert (view.budget, view.spent, view.revision) == (None, None, 2)
    listed = await budgets_view(r.tenants)
    assert [t.tenant for t in listed.tenants] == ["alpha", "zeta"]
    await r.operator_budgets(BudgetFields("zeta"))  # cleared
    assert [t.tenant for t in (await budgets_view(r.tenants)).tenants] == ["alpha"]


# -- decisions and evidence -----------------------------------------------------------------


async def test_a_decision_reads_with_its_evidence_and_an_unknown_one_is_not_found(
    r: Reads,
) -> None:
    decision = await r.served("acme", "a", "r1", tokens=1, cost=None)
    later = replace(r.store.evidence[0], request_id="r2", started_at=T0.replace(minute=5))
    r.store.evidence.append(later)
    read = await decision_read(r.store, decision.id)
    assert (read.mint_decision_id, read.lineage.tenant) == (decision.id, "acme")
    assert [e.request_id for e in read.evidence] == ["r2", "r1"]  # newest first
    found = await dispatch_decisions(r.store, "acme", decision.dispatch_id)
    assert [d.mint_decision_id for d in found] == [decision.id]
    with pytest.raises(GatewayError) as missing:
        await decision_read(r.store, "md_unknown")
    assert missing.value.code == "decision-not-found"


async def test_evidence_is_filtered_by_account_and_start(r: Reads) -> None:
    await r.served("acme", "a", "r1", tokens=1, cost=None, at=YESTERDAY)
    await r.served("acme", "a", "r2", tokens=1, cost=None)
    await r.served("acme", "b", "r3", tokens=1, cost=None)
    of_a = await evidence_list(r.store, account_id="a")
    assert [e.request_id for e in of_a.evidence] == ["r2", "r1"]
    today = await evidence_list(r.store, account_id="a", since=T0.replace(hour=0))
    assert [e.request_id for e in today.evidence] == ["r2"]
