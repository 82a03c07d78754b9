"""What services need from durable storage. Implemented by leasegate.db on SQLite and Postgres.

The control plane's services depend on these Protocols (`MintStore`, `DecisionEvidenceReader`),
never on the concrete `Store`; `tests/contract/test_mint_store.py` holds every implementation
to them.

Refusals the database itself decides (they travel as these exceptions, never as driver errors):

    DispatchLeaseHeld           a live lease already exists for this (tenant, dispatch_id)
    LeaseCapacityExhausted      the account already holds lease_capacity live leases
    CitedDecisionSuperseded     the cited decision already has a successor
    KeyNotLive                  renewal of a key that is revoked, expired or unknown
    IdempotencyKeyTaken         another decision already holds this (tenant, idempotency_key)
    AdminStateMoved             the audit chain moved since the overlay the mint decided with

Each is raised after the whole transaction was rolled back: nothing was written. A store that
fails a call raises a `StoreError` (`leasegate.core.ports.errors`) instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from leasegate.core.records import EvidenceRow, KeyRecord, MintDecision, RevokeReason


class StorageRefusal(Exception):
    """Base of the refusals above."""


class DispatchLeaseHeld(StorageRefusal):
    pass


class LeaseCapacityExhausted(StorageRefusal):
    pass


class CitedDecisionSuperseded(StorageRefusal):
    pass


class KeyNotLive(StorageRefusal):
    pass


class AdminStateMoved(StorageRefusal):
    """The audit chain grew between reading the overlay and committing: decide again."""


class IdempotencyKeyTaken(StorageRefusal):
    pass


@dataclass(frozen=True, slots=True)
class EvidenceSummary:
    """What the proxy has recorded for a cited decision's key (a hop's evidence clause)."""

    has_terminal: bool
    """Any terminal row at all: the key reached the proxy, so the mint response was not lost."""
    qualifying_request_id: str | None
    """The first row whose outcome qualifies for a hop (SPEC §4), or None."""
    context_length_request_id: str | None = None
    """The first `context-length-exceeded` row, or None: it qualifies a context-fallback hop
    only."""


class KeyReader(Protocol):
    async def get_key(self, key_id: str) -> KeyRecord | None:
        """The key's record, revoked or not; None when no such key was ever minted."""


class EvidenceWriter(Protocol):
    async def write_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        """Insert rows in one transaction; a row whose request_id already exists is ignored
        (replays are safe). Raises StoreRejected (`leasegate.core.ports.errors`) when the
        content is at fault: writing the same rows again cannot succeed; StoreUnavailable
        when the database is: the same rows are retried."""


class EvidenceReader(Protocol):
    async def query_evidence(
        self,
        *,
        decision_id: str | None = None,
        account_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        served_model: str | None = None,
        outcome: str | None = None,
    ) -> list[EvidenceRow]:
        """Newest first."""

    async def outcome_counts(self, since: datetime) -> dict[str, int]:
        """Rows per outcome started at or after `since`; outcomes with none are absent."""

    async def evidence_for_decisions(
        self, decision_ids: Iterable[str]
    ) -> dict[str, list[EvidenceRow]]:
        """Every asked id is a key of the answer; each list newest first."""


class DecisionReader(Protocol):
    async def get_decision(self, decision_id: str) -> MintDecision | None: ...

    async def decisions_for_dispatch(self, tenant: str, dispatch_id: str) -> list[MintDecision]:
        """Oldest first."""

    async def find_idempotent(self, tenant: str, idempotency_key: str) -> MintDecision | None:
        """The decision recorded under this key; its request_fingerprint tells reuse apart."""


class HopReader(Protocol):
    """The two reads a hop (and a mint nobody can serve) needs beyond the decision itself."""

    async def evidence_summary(self, decision_id: str) -> EvidenceSummary:
        """The cited decision's evidence, summed up (three indexed point reads)."""

    async def live_key_of_dispatch(
        self, tenant: str, dispatch_id: str, now: datetime
    ) -> str | None:
        """The key holding this dispatch's one live lease, if any."""


class LeaseCounts(Protocol):
    async def live_lease_counts(self, account_ids: Iterable[str], now: datetime) -> dict[str, int]:
        """Live keys per account; every asked id is a key of the answer."""
        ...


class KeyRevoker(Protocol):
    """The single seam that ends one key (an API or console revocation)."""

    async def revoke_key(
        self, key_id: str, reason: RevokeReason, now: datetime
    ) -> tuple[KeyRecord | None, bool]:
        """(the record after, whether this call ended the key). Unknown key: (None, False)."""


class LeaseStore(KeyReader, LeaseCounts, KeyRevoker, Protocol):
    """Mints, renewals and revocations. A lease is a live key row: nothing else to keep in step.

    A key is live while `revoked_at IS NULL AND expires_at > now`; every path that ends one
    reports whether *it* ended it, and exactly one path ever does.
    """

    async def get_key_and_decision(
        self, key_id: str
    ) -> tuple[KeyRecord, MintDecision | None] | None:
        """A key and the decision that minted it, read together (a renewal starts from both);
        None when there is no such key."""

    async def record_decision(self, decision: MintDecision) -> None:
        """Record a refused mint (no key). Raises IdempotencyKeyTaken."""

    async def commit_mint(
        self,
        decision: MintDecision,
        key: KeyRecord,
        *,
        lease_capacity: int | None,
        now: datetime,
        admin_revision: int | None = None,
    ) -> None:
        """Record a selected mint and its key in one transaction, or nothing.

        With `admin_revision`, the audit chain must still be at that revision (the overlay the
        mint decided with is current) and hold it until the commit. Raises AdminStateMoved,
        DispatchLeaseHeld, LeaseCapacityExhausted, CitedDecisionSuperseded,
        IdempotencyKeyTaken.
        """

    async def renew_key(
        self,
        old_key_id: str,
        decision: MintDecision,
        new_key: KeyRecord,
        *,
        lease_capacity: int | None,
        now: datetime,
        admin_revision: int | None = None,
    ) -> KeyRecord:
        """Insert the new key, then revoke the old one ("renewed"); the old key after.

        The old key's lease slot passes to the new key. When `decision.cites_decision_id` is
        set (the renewed key's decision) the renewal becomes its successor. Raises KeyNotLive,
        LeaseCapacityExhausted (only when capacity was lowered below what is held),
        CitedDecisionSuperseded, and AdminStateMoved as `commit_mint` does.
        """

    async def revoke_account_keys(
        self, account_id: str, reason: RevokeReason, now: datetime
    ) -> list[KeyRecord]:
        """End every live key of the account; returns the keys this call ended."""


@dataclass(frozen=True, slots=True)
class PoolDemand:
    """Who holds a pool's leases and who a saturated pool turned away (fair shares,
    docs/capacity.md)."""

    held: Mapping[str, int]
    """Live leases per tenant on the pool's accounts; tenants holding none are absent."""
    starved: frozenset[str]
    """Tenants refused `no-eligible-account` for the model since the window's start."""
    spent: Mapping[str, float]
    """Tokens (input and output) of the evidence rows of each tenant's keys on the pool's
    accounts started since the spend window's start; tenants with none are absent."""


class PoolReader(Protocol):
    """The two reads a mint makes about the pool beyond its accounts' health and leases."""

    async def affinity_account(
        self, tenant: str, model: str, affinity: str, since: datetime
    ) -> str | None:
        """The account of the newest selected decision of this tenant and requested model
        naming `affinity`, made at or after `since`; None when there is none."""

    async def pool_demand(
        self,
        account_ids: Iterable[str],
        model: str,
        since: datetime,
        now: datetime,
        spent_since: datetime,
    ) -> PoolDemand:
        """Live leases per tenant on these accounts at `now`, the tenants refused
        `no-eligible-account` for `model` at or after `since`, and the tokens each tenant's
        keys spent on these accounts in requests started from `spent_since` to `now`: one
        round trip."""


@dataclass(frozen=True, slots=True)
class PairSpend:
    """What the upstream of one (account, served model) was sent over a window."""

    account_id: str
    served_model: str
    requests: int
    """Requests that reached the upstream (rows with an upstream status)."""
    input_tokens: int
    output_tokens: int
    waited_s: float = 0.0
    """The `Retry-After` seconds of the requests the proxy refused `account-quota-exhausted`:
    time the pair's leases spent waiting for their quota instead of sending."""


LONGEST_REQUEST_COUNTED_S = 300.0
"""How far before a window `spend_by_pair` looks for requests that ended in it."""


class LeaseSpendReader(Protocol):
    """What the lease-rate meter reads (adaptive lease ceilings, docs/capacity.md)."""

    async def spend_by_pair(self, since: datetime, until: datetime) -> list[PairSpend]:
        """Evidence rows of requests that *ended* in [since, until) (`started_at` plus
        `duration_ms`), summed per (account, served model). By the end, not the start: a
        request still running when a window closes is counted in the window it ends in, not
        lost between the two (its row did not exist when the first was read). Requests that
        ran longer than `LONGEST_REQUEST_COUNTED_S` are not counted (the read is bounded)."""

    async def live_leases_by_pair(
        self, account_ids: Iterable[str], now: datetime
    ) -> dict[tuple[str, str], int]:
        """Live keys of these accounts per (account, served model); pairs with none are
        absent."""


class MintStore(LeaseStore, DecisionReader, HopReader, PoolReader, Protocol):
    """Everything mint, hops, renewal and revocation call: one `Store` implements it, and so
    does the tests' in-memory twin."""


class DecisionEvidenceReader(DecisionReader, EvidenceReader, Protocol):
    """Reading a dispatch's decisions with their evidence rows."""
