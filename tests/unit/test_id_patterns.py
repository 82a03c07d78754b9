"""One pattern per kind of id, and each no wider than the column that stores it: an id a
path or query accepts always fits its row (a 65-character decision id is refused at the edge,
never by the database)."""

from __future__ import annotations

import re
import typing

import pytest
from pydantic import BaseModel
from sqlalchemy import String

from leasegate.control_plane.paths import known_id
from leasegate.control_plane.routes import _ID_PATH
from leasegate.core.errors import GatewayError
from leasegate.core.ids import (
    DISPATCH_PART_MAX,
    DISPATCH_PART_PATTERN,
    RECORD_ID_MAX,
    RECORD_ID_PATTERN,
)
from leasegate.db.models import Base
from leasegate.wire import MintBody


def _pattern(model: type[BaseModel], name: str) -> str:
    """The pattern a body's field is checked against (`Annotated[str, ...] | None` too)."""
    info = model.model_fields[name]
    metadata = list(info.metadata)
    for member in typing.get_args(info.annotation):
        for extra in getattr(member, "__metadata__", ()):
            metadata.extend(getattr(extra, "metadata", [extra]))
    (pattern,) = {m.pattern for m in metadata if getattr(m, "pattern", None)}
    return str(pattern)


DECISION_ID_PATTERN = _pattern(MintBody, "retry_of_mint_decision_id")


def _id_columns() -> list[tuple[str, int | None]]:
    found = []
    for table in Base.metadata.tables.values():
        for column in table.columns:
            if (column.name == "id" or column.name.endswith("_id")) and isinstance(
                column.type, String
            ):
                found.append((f"{table.name}.{column.name}", column.type.length))
    return found


def test_every_string_id_column_is_as_long_as_the_record_id_pattern_allows() -> None:
    columns = _id_columns()
    assert any(name.endswith(".account_id") for name, _ in columns)
    for name, length in columns:
        if length is None:  # unbounded text: a dispatch's own name
            continue
        assert length == RECORD_ID_MAX, name


@pytest.mark.parametrize("pattern", [RECORD_ID_PATTERN, DECISION_ID_PATTERN, _ID_PATH])
def test_record_id_patterns_accept_exactly_a_columns_length(pattern: str) -> None:
    assert re.fullmatch(pattern, "a" * RECORD_ID_MAX)
    assert not re.fullmatch(pattern, "a" * (RECORD_ID_MAX + 1))


def test_the_dispatch_part_pattern_is_the_one_the_bodies_use() -> None:
    assert _pattern(MintBody, "tenant") == _pattern(MintBody, "dispatch_id")
    assert _pattern(MintBody, "tenant") == DISPATCH_PART_PATTERN
    assert re.fullmatch(DISPATCH_PART_PATTERN, "a" * DISPATCH_PART_MAX)
    assert not re.fullmatch(DISPATCH_PART_PATTERN, "a" * (DISPATCH_PART_MAX + 1))


def test_a_path_id_longer_than_its_column_is_not_found() -> None:
    known_id("md_" + "a" * (RECORD_ID_MAX - 3), "decision-not-found")
    with pytest.raises(GatewayError) as refused:
        known_id("md_" + "a" * (RECORD_ID_MAX - 2), "decision-not-found")
    assert refused.value.code == "decision-not-found"
