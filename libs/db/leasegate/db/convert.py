"""Rows to records and back: the only place SQLAlchemy objects meet the core dataclasses.

Columns are named as the records' fields, so each conversion goes by the record's field list
(`dataclasses.fields`); the records are built by the same functions as from asyncpg's rows
(`leasegate.pg.rows`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from leasegate.core.records import EvidenceRow, KeyRecord, MintDecision
from leasegate.db.models import EvidenceRecordRow, KeyRow, MintDecisionRow, live_dispatch_of
from leasegate.pg.rows import decision_of_row, key_of_row

_EVIDENCE_FIELDS = tuple(f.name for f in fields(EvidenceRow))
_KEY_FIELDS = tuple(f.name for f in fields(KeyRecord))
_DECISION_FIELDS = tuple(f.name for f in fields(MintDecision))


def key_values(key: KeyRecord) -> dict[str, Any]:
    """Column values for a new key row (named as the record's fields); a live key holds its
    dispatch's slot."""
    live = key.revoked_at is None
    values = {name: getattr(key, name) for name in _KEY_FIELDS}
    values["live_dispatch"] = live_dispatch_of(key.tenant, key.dispatch_id) if live else None
    return values


def key_record(row: KeyRow) -> KeyRecord:
    return key_of_row({name: getattr(row, name) for name in _KEY_FIELDS})


def decision_values(decision: MintDecision) -> dict[str, Any]:
    values = {name: getattr(decision, name) for name in _DECISION_FIELDS}
    values["passed_over"] = [
        {"account_id": p.account_id, "code": p.code} for p in decision.passed_over
    ]
    for name in ("allowed_providers", "allowed_regions"):
        names = values[name]
        values[name] = list(names) if names is not None else None
    return values


def decision_record(row: MintDecisionRow) -> MintDecision:
    return decision_of_row({name: getattr(row, name) for name in _DECISION_FIELDS})


def evidence_record(row: EvidenceRecordRow) -> EvidenceRow:
    # outcome and scope are stored as the Literal strings they were written as
    return EvidenceRow(**{name: getattr(row, name) for name in _EVIDENCE_FIELDS})
