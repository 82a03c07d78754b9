"""Audit records on the wire, one model per record kind, told apart by `kind`; and what every
audited change's body says (`AuditedBody`).

The wire shape is not the hash's: a record's hash covers `leasegate.audit.chain.canonical`,
a deliberately separate, versioned encoding that must never change for a record already
written. `tests/unit/test_wire_complete.py` ties both to `AuditRecord`'s fields.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from leasegate.core.vocab import ChainStatus
from leasegate.wire.base import Time, WireModel
from leasegate.wire.fields import OnBehalfOf, Reason, RequestBody


class AuditedBody(RequestBody):
    """What every audited change says besides the change itself (an account's state, a
    tenant's budget): the chain revision it was decided on, why, and for whom."""

    expected_revision: int = Field(ge=0)
    reason: Reason
    on_behalf_of: OnBehalfOf | None = None


class AccountStateRecord(WireModel):
    """An operator set an account's admin state."""

    kind: Literal["account-state"]
    seq: int
    at: Time
    actor: str
    authenticated_by: str
    on_behalf_of: str | None
    account_id: str
    state: str
    reason: str
    revoked_keys: int
    prev_hash: str
    hash: str


class TenantBudgetRecord(WireModel):
    """An operator set or cleared a tenant's budget (`state` is `set` or `cleared`)."""

    seq: int
    at: Time
    kind: Literal["tenant-budget"]
    actor: str
    authenticated_by: str
    on_behalf_of: str | None
    tenant: str | None
    state: str
    period: str | None
    max_tokens: int | None
    max_cost: str | None
    """The decimal string the operator gave, exactly as hashed."""
    reason: str
    prev_hash: str
    hash: str


AuditRecordView = Annotated[AccountStateRecord | TenantBudgetRecord, Field(discriminator="kind")]


class AuditReport(WireModel):
    """`GET /audit`: the whole chain and whether it verifies."""

    chain: ChainStatus
    revision: int
    first_bad_seq: int | None
    problem: str | None
    records: tuple[AuditRecordView, ...]
