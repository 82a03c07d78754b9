"""What every wire model shares: frozen values, the one time format, money as a string.

`Time` is an aware datetime in Python and RFC 3339 with a `Z` and milliseconds on the wire
(`leasegate.core.clock.iso`); `Money` is a `Decimal` in Python and a decimal string on the
wire, never a JSON number, so no float ever touches an amount. Reading is lenient about
what it does not know: a field a newer server adds is ignored, never an error.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from pydantic import AwareDatetime, PlainSerializer, WithJsonSchema

from leasegate.core.clock import iso
from leasegate.core.envelope import WireModel

__all__ = ["Instant", "Money", "Time", "WireModel", "money"]


def money(value: Decimal | None) -> str | None:
    """Money travels as a decimal string, never a JSON number (no float ever touches it)."""
    return None if value is None else format(value.normalize(), "f")


def _money(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _instant(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


Time = Annotated[
    AwareDatetime,
    PlainSerializer(iso, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A UTC time, millisecond precision on the wire: `2026-01-02T03:04:05.678Z`."""

Instant = Annotated[
    AwareDatetime,
    PlainSerializer(_instant, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A UTC time at full (microsecond) precision, as a query's bound echoes it."""

Money = Annotated[
    Decimal,
    PlainSerializer(_money, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}),
]
"""An amount in the accounts file's currency: `"1.5"`, `"0.000125"`."""
