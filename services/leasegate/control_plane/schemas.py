"""Request bodies of the control plane. Unknown fields and wrong types are 400 invalid-request.

Every string a body carries is stored somewhere (a decision, a key, an audit record), so each
is bounded by its column and refused when it holds a control character (NUL included) or a
lone surrogate: input that can never succeed is a 400, never a store error (503).
`tests/unit/test_request_columns.py` walks every field against its column.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from leasegate.core.ids import (
    DISPATCH_PART_MAX,
    DISPATCH_PART_PATTERN,
    RECORD_ID_MAX,
    RECORD_ID_PATTERN,
)
from leasegate.core.text import MODEL_NAME_MAX, text_problem
from leasegate.providers import KINDS

ID_MAX = DISPATCH_PART_MAX
ID_PATTERN = DISPATCH_PART_PATTERN
DECISION_ID_MAX = RECORD_ID_MAX
"""Decision ids are `md_<24 hex>`; the citing column holds 64 characters."""
DECISION_ID_PATTERN = RECORD_ID_PATTERN


def _storable(value: str) -> str:
    # Lengths are checked by the field's max_length; this refuses what no column can hold.
    problem = text_problem(value, len(value))
    if problem is not None:
        raise ValueError(problem)
    return value


ModelName = Annotated[
    str, Field(min_length=1, max_length=MODEL_NAME_MAX), AfterValidator(_storable)
]
Role = Annotated[str, Field(max_length=100), AfterValidator(_storable)]
Reason = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_storable)]
OnBehalfOf = Annotated[str, Field(max_length=200), AfterValidator(_storable)]
AFFINITY_MAX = 200


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("must be printable characters")
    return value


Affinity = Annotated[
    str,
    Field(min_length=1, max_length=AFFINITY_MAX),
    AfterValidator(_storable),
    AfterValidator(_printable),
]
"""A session or task id a mint asks to stay with: the account that last served it is chosen
while it is eligible and has room (docs/api.md)."""


def _known_kind(value: str) -> str:
    if value not in KINDS:
        raise ValueError(f"unknown provider kind (one of: {', '.join(KINDS)})")
    return value


ProviderName = Annotated[str, Field(max_length=40), AfterValidator(_known_kind)]
Region = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
"""A cloud region as the accounts file names it: `eu-central-1`, `europe-west1`, `global`."""
RESIDENCY_MAX = 32
ProviderNames = Annotated[
    tuple[ProviderName, ...], Field(min_length=1, max_length=RESIDENCY_MAX, strict=False)
]
Regions = Annotated[tuple[Region, ...], Field(min_length=1, max_length=RESIDENCY_MAX, strict=False)]
DispatchPart = Annotated[str, Field(max_length=ID_MAX, pattern=ID_PATTERN)]
DecisionId = Annotated[str, Field(max_length=DECISION_ID_MAX, pattern=DECISION_ID_PATTERN)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


MaxTokens = Annotated[int, Field(gt=0, le=2**62)]
MaxCost = Annotated[str, Field(pattern=r"^[0-9]{1,11}(\.[0-9]{1,9})?$")]
"""A decimal string in the accounts file's currency, e.g. "1.50" (never a JSON number)."""


class BudgetBody(Strict):
    """A dispatch's spend ceiling, shared by its whole chain; at least one bound."""

    max_tokens: MaxTokens | None = None
    max_cost: MaxCost | None = None

    @model_validator(mode="after")
    def _bounded(self) -> BudgetBody:
        if self.max_tokens is None and self.max_cost is None:
            raise ValueError("a budget needs max_tokens, max_cost or both")
        return self

    @property
    def cost(self) -> Decimal | None:
        return Decimal(self.max_cost) if self.max_cost is not None else None


class MintBody(Strict):
    tenant: DispatchPart
    dispatch_id: DispatchPart
    model: ModelName
    role: Role | None = None
    ttl_s: int | None = Field(default=None, gt=0)
    retry_of_mint_decision_id: DecisionId | None = None
    supersedes_mint_decision_id: DecisionId | None = None
    budget: BudgetBody | None = None
    affinity: Affinity | None = None
    allowed_providers: ProviderNames | None = None
    """Data residency: the provider kinds this dispatch may be served by (within the
    tenant's configured ones); a hop keeps its chain's."""
    allowed_regions: Regions | None = None
    """Data residency: the regions (an account's `region` / `location`) it may be served in."""


class RenewBody(Strict):
    ttl_s: int | None = Field(default=None, gt=0)


class AuditedBody(Strict):
    """What every audited change says besides the change itself (an account's state, a
    tenant's budget): the chain revision it was decided on, why, and for whom."""

    expected_revision: int = Field(ge=0)
    reason: Reason
    on_behalf_of: OnBehalfOf | None = None


class StateBody(AuditedBody):
    state: Literal["enabled", "disabled", "draining"]
