"""Every string field of every control-plane request model fits the column it is stored in,
so a value the model accepts can never be refused by the database (issue 10)."""

from __future__ import annotations

import typing

import annotated_types
import pytest
from pydantic import BaseModel
from sqlalchemy import String

from leasegate.db.models import Base
from leasegate.wire import MintBody, RenewBody, StateBody, TenantBudgetBody

# (model, field) -> every (table, column) the value is written to
STORED_IN: dict[tuple[type[BaseModel], str], list[tuple[str, str]]] = {
    (MintBody, "tenant"): [("mint_decisions", "tenant"), ("keys", "tenant")],
    (MintBody, "dispatch_id"): [("mint_decisions", "dispatch_id"), ("keys", "dispatch_id")],
    (MintBody, "model"): [("mint_decisions", "model"), ("keys", "model")],
    (MintBody, "role"): [("mint_decisions", "role")],
    (MintBody, "affinity"): [("mint_decisions", "affinity")],
    (MintBody, "allowed_providers"): [("mint_decisions", "allowed_providers")],
    (MintBody, "allowed_regions"): [("mint_decisions", "allowed_regions")],
    (MintBody, "retry_of_mint_decision_id"): [("mint_decisions", "cites_decision_id")],
    (MintBody, "supersedes_mint_decision_id"): [("mint_decisions", "cites_decision_id")],
    (StateBody, "state"): [("audit_records", "state")],
    (StateBody, "reason"): [("audit_records", "reason")],
    (StateBody, "on_behalf_of"): [("audit_records", "on_behalf_of")],
    (TenantBudgetBody, "period"): [("audit_records", "period")],
    (TenantBudgetBody, "max_cost"): [("audit_records", "max_cost")],
    (TenantBudgetBody, "reason"): [("audit_records", "reason")],
    (TenantBudgetBody, "on_behalf_of"): [("audit_records", "on_behalf_of")],
}
MODELS: list[type[BaseModel]] = [MintBody, RenewBody, StateBody, TenantBudgetBody]


def _string_fields(model: type[BaseModel]) -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        annotation = str(info.annotation)
        if "str" in annotation or "Literal" in annotation:
            names.append(name)
    return names


def _max_length(model: type[BaseModel], name: str) -> int:
    info = model.model_fields[name]
    if "Literal" in str(info.annotation):  # `Literal[...]`, or `Literal[...] | None`
        members = [info.annotation, *typing.get_args(info.annotation)]
        literals = [m for m in members if typing.get_origin(m) is typing.Literal]
        return max(len(v) for literal in literals for v in typing.get_args(literal))
    metadata = list(info.metadata)
    for member in typing.get_args(info.annotation):  # `Annotated[str, ...] | None`
        for extra in getattr(member, "__metadata__", ()):
            metadata.extend(getattr(extra, "metadata", [extra]))
    lengths = [m.max_length for m in metadata if isinstance(m, annotated_types.MaxLen)]
    assert lengths, f"{model.__name__}.{name} has no max_length"
    return min(lengths)


def test_every_string_field_is_mapped_to_its_columns() -> None:
    fields = {(model, name) for model in MODELS for name in _string_fields(model)}
    assert fields == set(STORED_IN)


@pytest.mark.parametrize(
    ("model", "name"), list(STORED_IN), ids=[f"{m.__name__}.{n}" for m, n in STORED_IN]
)
def test_field_fits_its_columns(model: type[BaseModel], name: str) -> None:
    for table, column in STORED_IN[(model, name)]:
        column_type = Base.metadata.tables[table].columns[column].type
        column_length = column_type.length if isinstance(column_type, String) else None
        if column_length is not None:  # Text and unbounded String hold any length
            assert _max_length(model, name) <= column_length, (model.__name__, name, table)
