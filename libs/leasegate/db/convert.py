"""Rows to records and back: the only place SQLAlchemy objects meet the core dataclasses."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, cast

from leasegate.core.errors import PassOver
from leasegate.core.records import (
    DecisionOutcome,
    EvidenceRow,
    KeyRecord,
    MintDecision,
    MintKind,
)
from leasegate.db.models import EvidenceRecordRow, KeyRow, MintDecisionRow, live_dispatch_of

_EVIDENCE_FIELDS = tuple(f.name for f in fields(EvidenceRow))


def key_values(key: KeyRecord) -> dict[str, Any]:
    """Column values for a new key row; a live key holds its dispatch's slot."""
    live = key.revoked_at is None
    return {
        "key_id": key.key_id,
        "secret_hash": key.secret_hash,
        "mint_decision_id": key.mint_decision_id,
        "tenant": key.tenant,
        "dispatch_id": key.dispatch_id,
        "model": key.model,
        "served_model": key.served_model,
        "account_id": key.account_id,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
        "revoke_reason": key.revoke_reason,
        "live_dispatch": live_dispatch_of(key.tenant, key.dispatch_id) if live else None,
        "chain_id": key.chain_id,
        "budget_max_tokens": key.budget_max_tokens,
        "budget_max_cost": key.budget_max_cost,
    }


def key_record(row: KeyRow) -> KeyRecord:
    return KeyRecord(
        key_id=row.key_id,
        secret_hash=row.secret_hash,
        mint_decision_id=row.mint_decision_id,
        tenant=row.tenant,
        dispatch_id=row.dispatch_id,
        model=row.model,
        served_model=row.served_model,
        account_id=row.account_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        revoke_reason=row.revoke_reason,
        chain_id=row.chain_id,
        budget_max_tokens=row.budget_max_tokens,
        budget_max_cost=row.budget_max_cost,
    )


def decision_values(decision: MintDecision) -> dict[str, Any]:
    return {
        "id": decision.id,
        "created_at": decision.created_at,
        "tenant": decision.tenant,
        "dispatch_id": decision.dispatch_id,
        "model": decision.model,
        "role": decision.role,
        "kind": decision.kind,
        "outcome": decision.outcome,
        "hop": decision.hop,
        "fallback_position": decision.fallback_position,
        "account_id": decision.account_id,
        "served_model": decision.served_model,
        "refusal_code": decision.refusal_code,
        "passed_over": [{"account_id": p.account_id, "code": p.code} for p in decision.passed_over],
        "key_id": decision.key_id,
        "cites_decision_id": decision.cites_decision_id,
        "successor_id": decision.successor_id,
        "authorised_by_request_id": decision.authorised_by_request_id,
        "idempotency_key": decision.idempotency_key,
        "request_fingerprint": decision.request_fingerprint,
        "chain_id": decision.chain_id,
        "budget_max_tokens": decision.budget_max_tokens,
        "budget_max_cost": decision.budget_max_cost,
    }


def decision_record(row: MintDecisionRow) -> MintDecision:
    return MintDecision(
        id=row.id,
        created_at=row.created_at,
        tenant=row.tenant,
        dispatch_id=row.dispatch_id,
        model=row.model,
        role=row.role,
        kind=cast("MintKind", row.kind),
        outcome=cast("DecisionOutcome", row.outcome),
        hop=row.hop,
        fallback_position=row.fallback_position,
        account_id=row.account_id,
        served_model=row.served_model,
        refusal_code=row.refusal_code,
        passed_over=tuple(PassOver(p["account_id"], p["code"]) for p in row.passed_over),
        key_id=row.key_id,
        cites_decision_id=row.cites_decision_id,
        successor_id=row.successor_id,
        authorised_by_request_id=row.authorised_by_request_id,
        idempotency_key=row.idempotency_key,
        request_fingerprint=row.request_fingerprint,
        chain_id=row.chain_id,
        budget_max_tokens=row.budget_max_tokens,
        budget_max_cost=row.budget_max_cost,
    )


def evidence_record(row: EvidenceRecordRow) -> EvidenceRow:
    # outcome and scope are stored as the Literal strings they were written as
    return EvidenceRow(**{name: getattr(row, name) for name in _EVIDENCE_FIELDS})
