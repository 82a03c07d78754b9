"""Rows to the core's (and the audit chain's) dataclasses: the column lists the raw asyncpg
statements select, and the one conversion per record, from any mapping of column names (an
asyncpg record, or a SQLAlchemy row read by `leasegate.db.convert` and `leasegate.db.audit`).
Columns are named as the records' fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, cast

from leasegate.audit.chain import Anchor, AuditRecord
from leasegate.core.errors import PassOver
from leasegate.core.records import DecisionOutcome, KeyRecord, MintDecision, MintKind

_KEY_FIELDS = tuple(f.name for f in fields(KeyRecord))
_DECISION_FIELDS = tuple(f.name for f in fields(MintDecision))

KEY_COLUMNS = ", ".join(_KEY_FIELDS)
"""Every column a `KeyRecord` is read from (the `keys` table's, less `live_dispatch`)."""
DECISION_COLUMNS = ", ".join(_DECISION_FIELDS)
"""The `mint_decisions` table's columns, as `MintDecision` names them."""


def prefixed_columns(table: str, columns: str) -> str:
    """`columns` of the table aliased `table`, each selected as `<table>_<column>` (two tables'
    columns in one row without a clash)."""
    return ", ".join(f"{table}.{c} AS {table}_{c}" for c in columns.split(", "))


def prefixed(row: Mapping[str, Any], table: str) -> Mapping[str, Any]:
    """The part of a row selected by `prefixed_columns(table, ...)`, under the plain names."""
    start = f"{table}_"
    return {name[len(start) :]: value for name, value in row.items() if name.startswith(start)}


def key_of_row(row: Mapping[str, Any]) -> KeyRecord:
    """A key from a row that has `KEY_COLUMNS` (timestamps come back in UTC from asyncpg)."""
    return KeyRecord(*(row[name] for name in _KEY_FIELDS))


def decision_of_row(row: Mapping[str, Any]) -> MintDecision:
    values = {name: row[name] for name in _DECISION_FIELDS}
    # json columns come back as their text
    passed_over = values["passed_over"]
    if isinstance(passed_over, str):
        passed_over = json.loads(passed_over)
    values["passed_over"] = tuple(PassOver(p["account_id"], p["code"]) for p in passed_over)
    for name in ("allowed_providers", "allowed_regions"):
        names = values[name]
        if isinstance(names, str):
            names = json.loads(names)
        values[name] = tuple(names) if names is not None else None
    values["kind"] = cast("MintKind", values["kind"])
    values["outcome"] = cast("DecisionOutcome", values["outcome"])
    return MintDecision(**values)


_RECORD_FIELDS = tuple(f.name for f in fields(AuditRecord))

RECORD_COLUMNS = ", ".join(_RECORD_FIELDS)
"""The `audit_records` table's columns, as `AuditRecord` names them."""
ANCHOR_COLUMNS = '"count", head_hash, signature'
"""The `audit_anchor` row's columns an `Anchor` is read from."""


def record_of_row(row: Mapping[str, Any]) -> AuditRecord:
    return AuditRecord(**{name: row[name] for name in _RECORD_FIELDS})


def anchor_of_row(row: Mapping[str, Any] | None) -> Anchor | None:
    return None if row is None else Anchor(row["count"], row["head_hash"], row["signature"])
