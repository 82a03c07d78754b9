"""`GET /usage` on the wire: tokens, cost and requests from evidence, grouped and paged.

A group carries only the keys it was grouped by: `tenant`, `account`, `model`, `day` are
absent (`MISSING`) unless named in `group_by`, and null when the rows had none (e.g. a
refusal before any account was chosen).
"""

from __future__ import annotations

from pydantic import MISSING, ConfigDict

from leasegate.wire.base import Instant, Money, WireModel


class UsageGroup(WireModel):
    # the group keys are absent unless grouped by: only they may be left out
    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    tenant: str | MISSING | None = MISSING
    account: str | MISSING | None = MISSING
    model: str | MISSING | None = MISSING
    day: str | MISSING | None = MISSING
    """`YYYY-MM-DD`, UTC."""
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cost: Money | None
    estimated_requests: int = 0
    """Of `requests`, those whose tokens and cost are the gateway's estimate (a stream that
    reported no usage: `usage_estimated` on the row), counted in the totals like the others."""


class UsageReport(WireModel):
    since: Instant
    until: Instant
    group_by: tuple[str, ...]
    currency: str | None
    """The accounts file's `currency`; null when it names none."""
    usage: tuple[UsageGroup, ...]
    next_offset: int | None
    """The next page's offset; null on the last page."""
