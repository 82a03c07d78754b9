"""The audit chain as values: records, the anchor, the canonical encoding, links, signatures.

A record's hash is SHA-256 over a canonical JSON encoding of every field but the hash itself,
`prev_hash` included, so each record commits to the whole chain before it. The anchor (count and
head hash) is HMAC-SHA256-signed with the audit key when one is configured: without the key
nobody can produce an anchor for a chain they rewrote.

Two record kinds share the chain. `account-state` records (every record written before tenant
budgets existed) keep encoding version 1, byte for byte, so every existing chain still
verifies. `tenant-budget` records use version 2, which covers every field of the record,
the budget's included; `account_id` is empty and `state` is `set` or `cleared` there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

GENESIS = "0" * 64
"""The `prev_hash` of record 1."""

ENCODING_VERSION = 1
"""The anchor signature's version and the `account-state` records' encoding."""
BUDGET_ENCODING_VERSION = 2

ACCOUNT_STATE = "account-state"
TENANT_BUDGET = "tenant-budget"


@dataclass(frozen=True, slots=True)
class Mutation:
    """What an operator said, as both an entry and the record it becomes carry it."""

    at: datetime
    actor: str
    """The admin token's configured name: who made the call."""
    authenticated_by: str
    """How the actor was authenticated (`admin-token`)."""
    on_behalf_of: str | None
    """A name the caller supplied (e.g. a dashboard's own operator); never authenticated here."""
    account_id: str
    state: str
    """`enabled`, `disabled` or `draining` (`set` or `cleared` for a tenant budget); anything
    else folds as `disabled`."""
    reason: str


@dataclass(frozen=True, slots=True)
class Entry(Mutation):
    """What one mutation asks to append; linking makes it a record."""

    kind: str = ACCOUNT_STATE
    budget: BudgetFields | None = None
    """A `tenant-budget` entry's tenant and bounds."""


@dataclass(frozen=True, slots=True)
class BudgetFields:
    """What a `tenant-budget` record sets: all bounds None (and no period) clears it."""

    tenant: str
    period: str | None = None
    """`day` or `month`."""
    max_tokens: int | None = None
    max_cost: str | None = None
    """The decimal string the operator gave, exact, in the accounts file's currency."""


@dataclass(frozen=True, slots=True)
class AuditRecord(Mutation):
    """A linked entry: the mutation, its place in the chain, and a `tenant-budget` entry's
    `BudgetFields` flattened (None on an `account-state` record)."""

    seq: int
    """1-based; the chain's length after this record is its revision."""
    revoked_keys: int
    """How many live keys the mutation ended (disable only)."""
    prev_hash: str
    hash: str
    kind: str = ACCOUNT_STATE
    """`account-state` or `tenant-budget`; chooses the encoding version."""
    tenant: str | None = None
    period: str | None = None
    max_tokens: int | None = None
    max_cost: str | None = None


@dataclass(frozen=True, slots=True)
class Anchor:
    """The chain's length and head hash as of the last append, kept apart from the records."""

    count: int
    head_hash: str
    signature: str | None = None
    """HMAC-SHA256 over (count, head_hash) with the audit key; None when no key is set."""


def canonical(record: AuditRecord) -> bytes:
    """The bytes a record's hash covers: every field but `hash`, sorted keys, no spaces.
    An `account-state` record leaves out the budget fields (all None there): version 1."""
    fields: dict[str, object] = {
        "v": ENCODING_VERSION,
        "seq": record.seq,
        "at": record.at.astimezone(UTC).isoformat(timespec="microseconds"),
        "actor": record.actor,
        "authenticated_by": record.authenticated_by,
        "on_behalf_of": record.on_behalf_of,
        "account_id": record.account_id,
        "state": record.state,
        "reason": record.reason,
        "revoked_keys": record.revoked_keys,
        "prev_hash": record.prev_hash,
    }
    if record.kind != ACCOUNT_STATE or _has_budget_fields(record):
        fields.update(
            v=BUDGET_ENCODING_VERSION,
            kind=record.kind,
            tenant=record.tenant,
            period=record.period,
            max_tokens=record.max_tokens,
            max_cost=record.max_cost,
        )
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _has_budget_fields(record: AuditRecord) -> bool:
    # an account-state record carrying budget fields is encoded as v2, so they stay covered
    return any(value is not None for value in _values(record, BudgetFields).values())


def _values(instance: object, shape: type[object]) -> dict[str, Any]:
    """The values `instance` holds under the field names of the dataclass `shape` (which it
    is, or carries flattened): what an entry hands its record, named in one place."""
    return {f.name: getattr(instance, f.name) for f in fields(shape)}  # type: ignore[arg-type]


def record_hash(record: AuditRecord) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def link(entry: Entry, *, seq: int, prev_hash: str, revoked_keys: int) -> AuditRecord:
    """The record `entry` becomes when appended after a chain of `seq - 1` records."""
    said = _values(entry, Mutation)
    budget = _values(entry.budget, BudgetFields) if entry.budget is not None else {}
    unhashed = AuditRecord(
        **said,
        **budget,
        seq=seq,
        revoked_keys=revoked_keys,
        prev_hash=prev_hash,
        hash="",
        kind=entry.kind,
    )
    return rehashed(unhashed)


def rehashed(record: AuditRecord) -> AuditRecord:
    """The record with its hash recomputed (also what a forger without the audit key can do)."""
    return replace(record, hash=record_hash(record))


def anchor_signature(count: int, head_hash: str, key: bytes) -> str:
    message = f"leasegate-audit-anchor:v{ENCODING_VERSION}:{count}:{head_hash}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def anchor_for(count: int, head_hash: str, key: bytes | None) -> Anchor:
    signature = anchor_signature(count, head_hash, key) if key is not None else None
    return Anchor(count, head_hash, signature)


def signature_valid(anchor: Anchor, key: bytes) -> bool:
    if anchor.signature is None:
        return False
    expected = anchor_signature(anchor.count, anchor.head_hash, key)
    return hmac.compare_digest(expected, anchor.signature)
