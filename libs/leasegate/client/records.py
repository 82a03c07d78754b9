"""What the control plane answers, and what a Dispatch hands back, as frozen values.
Times are timezone-aware UTC datetimes; durations are seconds. Nothing here ever holds a
secret but `Minted.key`, once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

KeyState = Literal["live", "revoked", "expired"]
DecisionKind = Literal["fresh", "retry", "supersede", "renewal"]


@dataclass(frozen=True, slots=True)
class PassOver:
    """One candidate selection skipped, and the first filter that ruled it out."""

    account_id: str
    code: str


@dataclass(frozen=True, slots=True)
class Minted:
    """A mint (or renewal) that took a lease."""

    key: str | None
    """The virtual key, shown once; None when this is an idempotent replay (`replayed`)."""
    key_id: str
    mint_decision_id: str
    account_id: str
    model: str
    served_model: str
    fallback_position: int
    hop: int
    expires_at: datetime
    passed_over: tuple[PassOver, ...]
    replayed: bool
    """True for a 200 replay of an earlier mint with the same Idempotency-Key."""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    state: KeyState
    mint_decision_id: str
    tenant: str
    dispatch_id: str
    account_id: str
    model: str
    served_model: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    revoke_reason: str | None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One terminal evidence row of the proxy (SPEC §4)."""

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
    refusal_reason: str | None
    error_code: str | None
    scope: str | None
    qualifying: bool
    input_tokens: int | None
    output_tokens: int | None
    started_at: datetime | None
    first_byte_ms: float | None
    duration_ms: float | None


@dataclass(frozen=True, slots=True)
class Decision:
    """A mint decision, refused or not, with its lineage, links and evidence."""

    mint_decision_id: str
    created_at: datetime
    tenant: str
    dispatch_id: str
    model: str
    role: str | None
    kind: DecisionKind
    outcome: Literal["selected", "refused"]
    refusal_code: str | None
    account_id: str | None
    served_model: str | None
    fallback_position: int | None
    hop: int
    passed_over: tuple[PassOver, ...]
    key_id: str | None
    retry_of_mint_decision_id: str | None
    supersedes_mint_decision_id: str | None
    renews_mint_decision_id: str | None
    successor_mint_decision_id: str | None
    authorised_by_request_id: str | None
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True, slots=True)
class Cooling:
    model: str
    """The served model name."""
    until: datetime
    reason: str | None
    trips: int


@dataclass(frozen=True, slots=True)
class Circuit:
    open: bool
    until: datetime | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class Account:
    id: str
    provider: str
    configured: bool
    admin_state: str
    health: Literal["healthy", "cooling", "circuit-open"]
    cooling_models: tuple[Cooling, ...]
    circuit: Circuit
    leases_held: int
    lease_capacity: int | None
    requests_in_flight: int | None
    """None for an account with no request ceiling: the proxy does not count those."""
    request_capacity: int | None


@dataclass(frozen=True, slots=True)
class Accounts:
    """Accounts in registry order, and the audit chain they were folded from."""

    accounts: tuple[Account, ...]
    revision: int
    chain: Literal["ok", "absent", "corrupt"]

    def get(self, account_id: str) -> Account | None:
        return next((a for a in self.accounts if a.id == account_id), None)


@dataclass(frozen=True, slots=True)
class Link:
    """One lease a dispatch held, in the order it held them."""

    mint_decision_id: str
    kind: DecisionKind
    account_id: str
    served_model: str
    fallback_position: int
    hop: int
    key_id: str
    ended: str | None = None
    """Why the dispatch moved on from this lease ("status 429", "in-stream error",
    "response-lost", "renewed", ...); None for the lease that gave the answer."""
    retried: tuple[str, ...] = ()
    """The transient failures this lease was retried after, in order ("status 503", ...)."""


@dataclass(frozen=True, slots=True)
class DispatchResult(Generic[T]):
    answer: T
    """What the caller's function returned."""
    chain: tuple[Link, ...]
    """Every lease used, oldest first; the last one gave the answer."""

    @property
    def decision(self) -> Link:
        return self.chain[-1]
