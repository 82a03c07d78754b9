"""What the usage reads ask of durable storage: tokens, cost and request counts summed from
evidence, grouped as the caller asks. Implemented by `leasegate.db.usage.UsageRepository`
(one GROUP BY) and, for the service tests, the in-memory twin
(`tests/fixtures/memory_store.py`); `tests/contract/test_mint_store.py` holds both to it.

A group's keys are the names grouped by (`tenant`, `account`, `model`, `day`), each the
group's value: the tenant of the rows' decisions, the account, the requested model, the UTC
day as `YYYY-MM-DD`. Groups come back in key order, a page at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal, Protocol

Grouping = Literal["tenant", "account", "model", "day"]
GROUPINGS: tuple[Grouping, ...] = ("tenant", "account", "model", "day")


@dataclass(frozen=True, slots=True)
class UsageGroup:
    keys: dict[str, str | None]
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cost: Decimal | None
    """None when no row of the group had a price."""
    estimated_requests: int = 0
    """Rows whose tokens and cost are the gateway's estimate (`usage_estimated`)."""


class UsageReader(Protocol):
    async def usage(
        self,
        since: datetime,
        until: datetime,
        group_by: Sequence[Grouping],
        *,
        limit: int,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[UsageGroup]:
        """The evidence rows started in `[since, until)`, summed per group of `group_by`, in
        key order; `tenant`, when given, keeps only the rows of that tenant's decisions."""
        ...
