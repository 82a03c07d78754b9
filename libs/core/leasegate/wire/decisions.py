"""Decisions and evidence on the wire.

`Evidence` carries every column of the proxy's terminal row (`leasegate.core.records.
EvidenceRow`), by the same names: the control plane renders a row with
`Evidence.model_validate(row, from_attributes=True)`, and `tests/unit/test_wire_complete.py`
holds the table, the row and this model to one field list.
"""

from __future__ import annotations

from pydantic import Field

from leasegate.core.records import DecisionOutcome, MintKind
from leasegate.wire.base import Money, Time, WireModel
from leasegate.wire.keys import Budget, PassOver


class Evidence(WireModel):
    """One terminal evidence row of the proxy. No prompt text, ever."""

    request_id: str
    key_id: str | None
    mint_decision_id: str | None
    account_id: str | None
    requested_model: str | None
    served_model: str | None
    endpoint: str
    stream: bool
    upstream_status: int | None
    outcome: str
    """`success`, `upstream-error`, ... (docs/api.md lists them all)."""
    refusal_reason: str | None
    error_code: str | None
    scope: str | None
    """`model` or `account`: what a qualifying failure counts against."""
    qualifying: bool
    input_tokens: int | None
    output_tokens: int | None
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    malformed_chunks: int
    cost: Money | None
    """In the accounts file's currency; null where the model has no prices or no usage came."""
    usage_estimated: bool = False
    """The tokens and cost are the gateway's estimate: the stream never reported usage."""
    started_at: Time
    first_byte_ms: float | None
    duration_ms: float
    retry_after_ms: float | None = None
    """The `Retry-After` the answer carried: the gateway's own on its refusal, the upstream's
    when it sent one."""


class EvidenceList(WireModel):
    """`GET /evidence`: newest first."""

    evidence: tuple[Evidence, ...]


class Lineage(WireModel):
    tenant: str
    dispatch_id: str
    model: str
    """The requested model: the lineage's effective model."""


class Decision(WireModel):
    """`GET /decisions/{id}`: one mint, refused or not, with its links and evidence rows."""

    mint_decision_id: str
    created_at: Time
    lineage: Lineage
    role: str | None
    kind: MintKind
    outcome: DecisionOutcome
    refusal_code: str | None
    account_id: str | None
    served_model: str | None
    fallback_position: int | None
    hop: int
    passed_over: tuple[PassOver, ...] = Field(default=())
    key_id: str | None
    retry_of_mint_decision_id: str | None
    supersedes_mint_decision_id: str | None
    renews_mint_decision_id: str | None
    successor_mint_decision_id: str | None
    authorised_by_request_id: str | None
    chain_id: str | None = None
    budget: Budget | None = None
    affinity: str | None = None
    """The session or task id the mint asked to stay with."""
    affinity_hit: bool = False
    """Selected because the account that last served `affinity` still had room."""
    affinity_miss: PassOver | None = None
    """A selected decision that did not follow its `affinity`: the account that last served
    it and why it was not taken. Null on a hit, with no affinity, and on a refusal (whose
    `passed_over` names every account)."""
    allowed_providers: tuple[str, ...] | None = None
    """The chain's own data residency (its first mint's; every hop keeps it)."""
    allowed_regions: tuple[str, ...] | None = None
    evidence: tuple[Evidence, ...] = Field(default=())

    @property
    def tenant(self) -> str:
        return self.lineage.tenant

    @property
    def dispatch_id(self) -> str:
        return self.lineage.dispatch_id

    @property
    def model(self) -> str:
        return self.lineage.model


class DecisionList(WireModel):
    """`GET /decisions?tenant&dispatch_id`: oldest first."""

    decisions: tuple[Decision, ...]
