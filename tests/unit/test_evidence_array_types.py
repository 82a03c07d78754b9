"""The asyncpg evidence insert's array types are plain data (so the proxy writes evidence
without SQLAlchemy); this holds them to the `evidence` table's model, which the migrations
are checked against (`tests/integration/test_migrations.py`). A new column fails here until it
has its array type."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Float, Integer, Numeric, String
from sqlalchemy.types import TypeEngine

from leasegate.db.models import EvidenceRecordRow
from leasegate.db.models.base import UTCDateTime
from leasegate.pg.evidence import ARRAY_TYPES, FIELDS, INSERT, TABLE


def _array_type(column_type: TypeEngine[Any]) -> str:
    if isinstance(column_type, UTCDateTime):
        return "timestamptz[]"
    if isinstance(column_type, Boolean):
        return "bool[]"
    if isinstance(column_type, Integer):
        return "int8[]"
    if isinstance(column_type, Float):
        return "float8[]"
    if isinstance(column_type, Numeric):  # after Float, which is a Numeric
        return "numeric[]"
    if isinstance(column_type, String):  # Text too; never varchar(n), which would truncate
        return "text[]"
    raise AssertionError(f"no array type for {column_type!r}")


def test_every_model_column_is_written_with_its_array_type() -> None:
    columns = EvidenceRecordRow.__table__.columns
    assert set(FIELDS) == set(columns.keys())
    assert {c.name: _array_type(c.type) for c in columns} == ARRAY_TYPES


def test_the_insert_names_the_models_table_and_ignores_replays() -> None:
    assert TABLE == EvidenceRecordRow.__tablename__
    assert INSERT.endswith("ON CONFLICT DO NOTHING")
    assert INSERT.count("$") == len(FIELDS)
