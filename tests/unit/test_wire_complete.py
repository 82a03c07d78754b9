"""Every field travels the whole way: the evidence table, the row, the control plane's view and
the client's record name the same fields; an audit record's hash covers every field the
record has, and its wire models carry them all. A field added in one place and forgotten in
another fails here, not in a caller's hands."""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from leasegate.audit import ACCOUNT_STATE, TENANT_BUDGET, AuditRecord, BudgetFields, Entry, link
from leasegate.audit.chain import Mutation, canonical
from leasegate.client import Evidence as ClientEvidence
from leasegate.client import parse
from leasegate.control_plane.views import evidence_view, record_view
from leasegate.core.records import EvidenceRow
from leasegate.db.models.audit_record import AuditRecordRow
from leasegate.db.models.evidence import EvidenceRecordRow
from leasegate.wire import AccountStateRecord, TenantBudgetRecord
from tests.fixtures.evidence import evidence_row

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
T0 = datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)
BUDGET_FIELDS = {"tenant", "period", "max_tokens", "max_cost"}


def _every_field_set() -> EvidenceRow:
    """A row with no field left at a default or null: a dropped field cannot pass unseen."""
    return replace(
        evidence_row("req-every-field", T0),
        refusal_reason="key-revoked",
        error_code="rate_limit_exceeded",
        scope="model",
        qualifying=True,
        cache_read_input_tokens=3,
        cache_creation_input_tokens=4,
        malformed_chunks=5,
        cost=Decimal("0.000125"),
    )


def _columns() -> set[str]:
    return {column.name for column in EvidenceRecordRow.__table__.columns}


def test_every_evidence_column_is_on_the_row_the_view_and_the_client() -> None:
    columns = _columns()
    assert {f.name for f in fields(EvidenceRow)} == columns
    assert set(evidence_view(_every_field_set()).model_dump(mode="json")) == columns
    assert set(ClientEvidence.model_fields) == columns


def test_every_evidence_column_is_documented() -> None:
    section = API_DOC.read_text(encoding="utf-8").split("## Terminal evidence", 1)[1]
    table = section.split("\n\n| what happened", 1)[0]
    documented = {
        name
        for line in table.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([a-z_]+)`", line.split("|")[1])
    }
    assert sorted(_columns() - documented) == []


def test_an_evidence_row_reaches_the_client_with_every_value() -> None:
    row = _every_field_set()
    sent = evidence_view(row).model_dump_json()
    body = json.loads(sent)
    assert body["cost"] == "0.000125"  # money is a decimal string, never a JSON number
    assert body["started_at"] == "2026-03-04T05:06:07.891Z"
    (read,) = parse.evidence_list({"evidence": [body]})
    assert {name: getattr(read, name) for name in _columns()} == {
        f.name: getattr(row, f.name) for f in fields(EvidenceRow)
    }


def _record(kind: str, **budget: object) -> AuditRecord:
    return AuditRecord(
        seq=7,
        at=T0,
        actor="ops-alice",
        authenticated_by="admin-token",
        on_behalf_of="dashboard:bob",
        account_id="openai-main" if kind == ACCOUNT_STATE else "",
        state="disabled" if kind == ACCOUNT_STATE else "set",
        reason="maintenance",
        revoked_keys=2,
        prev_hash="0" * 64,
        hash="f" * 64,
        kind=kind,
        **budget,  # type: ignore[arg-type]
    )


def _budget_record() -> AuditRecord:
    return _record(TENANT_BUDGET, tenant="acme", period="day", max_tokens=10, max_cost="2.50")


def test_the_audit_hash_covers_every_field_of_a_record_but_the_hash() -> None:
    # The canonical encoding is deliberately its own list, versioned, never the wire shape:
    # a field added to AuditRecord must be hashed, under a new encoding version (a chain
    # already written must keep verifying byte for byte).
    record_fields = {f.name for f in fields(AuditRecord)}
    hashed = set(json.loads(canonical(_budget_record()))) - {"v"}
    assert hashed == record_fields - {"hash"}
    version_1 = set(json.loads(canonical(_record(ACCOUNT_STATE)))) - {"v"}
    assert version_1 == record_fields - {"hash", "kind"} - BUDGET_FIELDS


def test_the_audit_records_on_the_wire_and_in_the_table_carry_every_field() -> None:
    record_fields = {f.name for f in fields(AuditRecord)}
    assert {c.name for c in AuditRecordRow.__table__.columns} == record_fields
    assert set(AccountStateRecord.model_fields) == record_fields - BUDGET_FIELDS
    # a budget record has no account and revokes nothing: both stay off its wire shape
    assert set(TenantBudgetRecord.model_fields) == record_fields - {"account_id", "revoked_keys"}
    budget = record_view(_budget_record()).model_dump(mode="json")
    assert (budget["tenant"], budget["max_cost"], budget["hash"]) == ("acme", "2.50", "f" * 64)
    state = record_view(_record(ACCOUNT_STATE)).model_dump(mode="json")
    assert (state["account_id"], state["revoked_keys"]) == ("openai-main", 2)


def test_a_linked_record_carries_every_value_of_its_entry_and_budget() -> None:
    # the record is the entry's mutation, its chain position and its budget flattened: a field
    # added to any of them and not to the record fails here
    said = {f.name for f in fields(Mutation)}
    assert {f.name for f in fields(BudgetFields)} == BUDGET_FIELDS
    chain_fields = {"seq", "revoked_keys", "prev_hash", "hash", "kind"}
    assert {f.name for f in fields(AuditRecord)} == said | BUDGET_FIELDS | chain_fields
    budget = BudgetFields("acme", "day", 10, "2.50")
    entry = Entry(T0, "ops-alice", "admin-token", "dashboard:bob", "", "set", "cap", budget=budget)
    record = link(replace(entry, kind=TENANT_BUDGET), seq=3, prev_hash="0" * 64, revoked_keys=0)
    assert {name: getattr(record, name) for name in said} == {
        name: getattr(entry, name) for name in said
    }
    assert {name: getattr(record, name) for name in BUDGET_FIELDS} == {
        "tenant": "acme",
        "period": "day",
        "max_tokens": 10,
        "max_cost": "2.50",
    }
