"""The gateway's durable facts as plain values: keys, mint decisions, evidence rows.

Adapters turn these into rows and back; services and pure code only ever see these.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal

from leasegate.core.errors import PassOver

KeyState = Literal["live", "revoked", "expired"]
RevokeReason = Literal["revoked", "renewed", "account-disabled"]
"""Why a key ended early (`keys.revoke_reason`): the revoke route, a renewal that replaced
it, or its account's keys ended together. The one home of these strings: the stores are
typed to write only these, the console reads them."""
REVOKED: RevokeReason = "revoked"
RENEWED: RevokeReason = "renewed"
ACCOUNT_DISABLED: RevokeReason = "account-disabled"
MintKind = Literal["fresh", "retry", "supersede", "renewal"]
DecisionOutcome = Literal["selected", "refused"]
Outcome = Literal[
    "success",
    "in-stream-error",
    "upstream-error",
    "timeout",
    "connect-error",
    "client-abort",
    "gateway-shutdown",
    "refused",
    "context-length-exceeded",
]
Scope = Literal["model", "account"]
AdminState = Literal["enabled", "disabled", "draining"]
"""An account's administrative state, set by operators on the audit chain."""


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A virtual key. The secret is never held here, only its hash."""

    key_id: str
    secret_hash: str
    mint_decision_id: str
    tenant: str
    dispatch_id: str
    model: str
    """The requested model the key was minted for (the lineage's effective model)."""
    served_model: str
    account_id: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoke_reason: str | None = None
    chain_id: str | None = None
    """The dispatch's chain (its first decision's id): hops and renewals share it, and its
    budget."""
    budget_max_tokens: int | None = None
    budget_max_cost: Decimal | None = None

    def state(self, now: datetime) -> KeyState:
        if self.revoked_at is not None:
            return "revoked"
        if now >= self.expires_at:
            return "expired"
        return "live"


@dataclass(frozen=True, slots=True)
class MintDecision:
    """One mint, refused or not. A refusal records its code and no account."""

    id: str
    created_at: datetime
    tenant: str
    dispatch_id: str
    model: str
    """The effective model of the lineage: the requested name."""
    role: str | None
    kind: MintKind
    outcome: DecisionOutcome
    hop: int
    fallback_position: int | None
    """The position selected; for a refusal, the position selection started at."""
    account_id: str | None = None
    served_model: str | None = None
    refusal_code: str | None = None
    passed_over: tuple[PassOver, ...] = ()
    key_id: str | None = None
    cites_decision_id: str | None = None
    successor_id: str | None = None
    authorised_by_request_id: str | None = None
    """For a retry: the evidence row whose qualifying outcome licensed the hop."""
    idempotency_key: str | None = None
    """The caller's idempotency key, unique per tenant; a replay answers with this decision."""
    request_fingerprint: str | None = None
    """A digest of the request that carried idempotency_key, to tell a replay from a reuse."""
    chain_id: str | None = None
    """The first decision of this dispatch's chain; a hop, a supersede and a renewal inherit
    it, and with it the chain's budget."""
    budget_max_tokens: int | None = None
    budget_max_cost: Decimal | None = None
    allowed_providers: tuple[str, ...] | None = None
    """The chain's own data residency (the first mint's; its hops inherit it)."""
    allowed_regions: tuple[str, ...] | None = None
    affinity: str | None = None
    """The caller's session or task id the mint asked to stay with (`POST /keys` `affinity`)."""
    affinity_hit: bool = False
    """Selected because the account that last served `affinity` still had room."""
    affinity_miss_account_id: str | None = None
    """The account that last served `affinity` when the mint did not go there (null on a hit,
    and when the affinity named no account yet)."""
    affinity_miss_code: str | None = None
    """Why that account was not taken: a pass-over code (`quota-exhausted`, ...)."""


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    """One terminal row per proxied request that presented a key. No prompt text, ever."""

    request_id: str
    key_id: str | None
    mint_decision_id: str | None
    account_id: str | None
    requested_model: str | None
    served_model: str | None
    endpoint: str
    stream: bool
    upstream_status: int | None
    outcome: Outcome
    refusal_reason: str | None
    error_code: str | None
    scope: Scope | None
    qualifying: bool
    input_tokens: int | None
    output_tokens: int | None
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    started_at: datetime
    first_byte_ms: float | None
    duration_ms: float
    malformed_chunks: int = 0
    cost: Decimal | None = None
    """In the accounts file's currency; None where the model has no prices or no usage came."""
    usage_estimated: bool = False
    """The tokens (and cost) are the gateway's estimate: the stream never reported usage
    (leasegate.providers.estimate)."""
    retry_after_ms: float | None = None
    """The `Retry-After` the answer carried: the gateway's own on its refusal, the upstream's
    when it sent one (the lease-rate meter sums the quota refusals': time leases waited)."""
