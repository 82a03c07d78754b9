"""What every request body shares: strict models, and the fields' bounded types.

A request body is the other direction of the wire: the control plane reads it (unknown fields
and wrong types are 400 `invalid-request`) and the client (`leasegate.client`) builds it, so
the two cannot take different fields. Every string a body carries is stored somewhere (a
decision, a key, an audit record), so each is bounded by its column and refused when it
holds a control character (NUL included) or a lone surrogate: input that can never succeed is
a 400, never a store error (503). `tests/unit/test_request_columns.py` walks every field
against its column.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from leasegate.core.ids import (
    DISPATCH_PART_MAX,
    DISPATCH_PART_PATTERN,
    RECORD_ID_MAX,
    RECORD_ID_PATTERN,
)
from leasegate.core.text import MODEL_NAME_MAX, text_problem
from leasegate.providers.kinds import KINDS

AFFINITY_MAX = 200
RESIDENCY_MAX = 32


class RequestBody(BaseModel):
    """A request body: frozen, strict about types, and no field it does not name."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _storable(value: str) -> str:
    # Lengths are checked by the field's max_length; this refuses what no column can hold.
    problem = text_problem(value, len(value))
    if problem is not None:
        raise ValueError(problem)
    return value


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("must be printable characters")
    return value


def _known_kind(value: str) -> str:
    if value not in KINDS:
        raise ValueError(f"unknown provider kind (one of: {', '.join(KINDS)})")
    return value


ModelName = Annotated[
    str, Field(min_length=1, max_length=MODEL_NAME_MAX), AfterValidator(_storable)
]
Role = Annotated[str, Field(max_length=100), AfterValidator(_storable)]
Reason = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_storable)]
OnBehalfOf = Annotated[str, Field(max_length=200), AfterValidator(_storable)]
Affinity = Annotated[
    str,
    Field(min_length=1, max_length=AFFINITY_MAX),
    AfterValidator(_storable),
    AfterValidator(_printable),
]
"""A session or task id a mint asks to stay with: the account that last served it is chosen
while it is eligible and has room (docs/api.md)."""

ProviderName = Annotated[str, Field(max_length=40), AfterValidator(_known_kind)]
Region = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
"""A cloud region as the accounts file names it: `eu-central-1`, `europe-west1`, `global`."""
ProviderNames = Annotated[
    tuple[ProviderName, ...], Field(min_length=1, max_length=RESIDENCY_MAX, strict=False)
]
Regions = Annotated[tuple[Region, ...], Field(min_length=1, max_length=RESIDENCY_MAX, strict=False)]
DispatchPart = Annotated[str, Field(max_length=DISPATCH_PART_MAX, pattern=DISPATCH_PART_PATTERN)]
"""A tenant or a dispatch id: the caller's own name (`leasegate.core.ids`)."""
DecisionId = Annotated[str, Field(max_length=RECORD_ID_MAX, pattern=RECORD_ID_PATTERN)]
"""A decision's id, `md_<24 hex>`, as a mint cites it (the citing column holds 64)."""
MaxTokens = Annotated[int, Field(gt=0, le=2**62)]
MaxCost = Annotated[str, Field(pattern=r"^[0-9]{1,11}(\.[0-9]{1,9})?$")]
"""A decimal string in the accounts file's currency, e.g. "1.50" (never a JSON number)."""
