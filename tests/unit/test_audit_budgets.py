"""Tenant budgets on the audit chain: a versioned record kind that old chains never see, whose
every field is covered by its hash, folded beside the account states."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.audit import (
    TENANT_BUDGET,
    Anchor,
    AuditRecord,
    BudgetFields,
    Entry,
    extend,
    fold,
    record_hash,
)
from leasegate.audit.chain import canonical
from leasegate.spend import TenantBudget

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KEY = b"audit-key"
BUDGET_FIELDS = {"kind", "tenant", "period", "max_tokens", "max_cost"}


def state_entry(account: str, state: str, n: int) -> Entry:
    return Entry(T0 + timedelta(seconds=n), "ops", "admin-token", None, account, state, f"r{n}")


def budget_entry(tenant: str, budget: BudgetFields | None, n: int) -> Entry:
    return Entry(
        at=T0 + timedelta(seconds=n),
        actor="ops",
        authenticated_by="admin-token",
        on_behalf_of=None,
        account_id="",
        state="set" if budget is not None and budget.period else "cleared",
        reason=f"r{n}",
        kind=TENANT_BUDGET,
        budget=budget or BudgetFields(tenant),
    )


def build(entries: list[Entry]) -> tuple[list[AuditRecord], Anchor | None]:
    records: list[AuditRecord] = []
    anchor: Anchor | None = None
    for entry in entries:
        record, anchor = extend(fold(records, anchor, key=KEY), entry, revoked_keys=0, key=KEY)
        records.append(record)
    return records, anchor


def test_a_budget_records_encoding_covers_every_field_of_the_record() -> None:
    records, _ = build([budget_entry("acme", BudgetFields("acme", "day", 1000, "2.50"), 0)])
    encoded = json.loads(canonical(records[0]))
    assert encoded["v"] == 2
    assert set(encoded) - {"v"} == {f.name for f in fields(AuditRecord)} - {"hash"}


def test_an_account_state_record_keeps_the_version_1_encoding_byte_for_byte() -> None:
    records, _ = build([state_entry("acct-a", "disabled", 0)])
    record = records[0]
    encoded = json.loads(canonical(record))
    assert encoded["v"] == 1
    assert set(encoded) - {"v"} == {f.name for f in fields(AuditRecord)} - {"hash"} - BUDGET_FIELDS
    # the bytes a chain written before budgets existed was hashed over
    v1 = {
        "v": 1,
        "seq": 1,
        "at": "2026-01-01T12:00:00.000000+00:00",
        "actor": "ops",
        "authenticated_by": "admin-token",
        "on_behalf_of": None,
        "account_id": "acct-a",
        "state": "disabled",
        "reason": "r0",
        "revoked_keys": 0,
        "prev_hash": "0" * 64,
    }
    expected = json.dumps(v1, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    assert record.hash == hashlib.sha256(expected).hexdigest() == record_hash(record)


def test_budgets_fold_beside_account_states_the_last_per_tenant_winning() -> None:
    records, anchor = build(
        [
            state_entry("acct-a", "disabled", 0),
            budget_entry("acme", BudgetFields("acme", "day", 1000, None), 1),
            budget_entry("beta", BudgetFields("beta", "month", None, "12.5"), 2),
            budget_entry("acme", BudgetFields("acme", "month", 5000, "1.000000001"), 3),
            budget_entry("gamma", BudgetFields("gamma", "day", 10, None), 4),
            budget_entry("gamma", None, 5),
        ]
    )
    verdict = fold(records, anchor, key=KEY)
    assert verdict.status == "ok"
    assert verdict.overlay == {"acct-a": "disabled"}
    assert verdict.budgets == {
        "acme": TenantBudget("month", 5000, Decimal("1.000000001")),
        "beta": TenantBudget("month", None, Decimal("12.5")),
    }


@pytest.mark.parametrize(
    "unreadable",
    [BudgetFields("acme", "week", 10, None), BudgetFields("acme", "day", None, "lots")],
)
def test_a_budget_this_build_cannot_read_enforces_nothing(unreadable: BudgetFields) -> None:
    records, anchor = build(
        [
            budget_entry("acme", BudgetFields("acme", "day", 10, None), 0),
            budget_entry("acme", unreadable, 1),
        ]
    )
    verdict = fold(records, anchor, key=KEY)
    assert (verdict.status, verdict.budgets) == ("ok", {})


@given(st.data())
def test_editing_any_field_of_a_budget_record_reads_corrupt(data: st.DataObject) -> None:
    records, anchor = build(
        [
            state_entry("acct-a", "draining", 0),
            budget_entry("acme", BudgetFields("acme", "day", 1000, "2.50"), 1),
            state_entry("acct-a", "enabled", 2),
        ]
    )
    edit = data.draw(
        st.sampled_from(
            [
                {"tenant": "other"},
                {"period": "month"},
                {"max_tokens": 1_000_000},
                {"max_tokens": None},
                {"max_cost": "250"},
                {"max_cost": None},
                {"kind": "account-state"},
                {"state": "cleared"},
                {"actor": "mallory"},
                {"reason": "nothing to see"},
            ]
        )
    )
    records[1] = replace(records[1], **edit)  # type: ignore[arg-type]
    verdict = fold(records, anchor, key=KEY)
    assert (verdict.status, verdict.problem, verdict.first_bad_seq) == (
        "corrupt",
        "hash-mismatch",
        2,
    )
    assert verdict.budgets == {}
