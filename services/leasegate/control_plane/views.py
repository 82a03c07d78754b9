"""How records look on the wire. Secrets never: a key's hash is not part of any view."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from leasegate.core.clock import iso
from leasegate.core.errors import PassOver
from leasegate.core.records import EvidenceRow, KeyRecord, MintDecision


def _time(at: datetime | None) -> str | None:
    return iso(at) if at is not None else None


def passed_over_view(passed: Sequence[PassOver]) -> list[dict[str, str]]:
    return [{"account_id": p.account_id, "code": p.code} for p in passed]


def key_view(key: KeyRecord, now: datetime) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "state": key.state(now),
        "mint_decision_id": key.mint_decision_id,
        "tenant": key.tenant,
        "dispatch_id": key.dispatch_id,
        "account_id": key.account_id,
        "model": key.model,
        "served_model": key.served_model,
        "created_at": _time(key.created_at),
        "expires_at": _time(key.expires_at),
        "revoked_at": _time(key.revoked_at),
        "revoke_reason": key.revoke_reason,
        "chain_id": key.chain_id,
        "budget": budget_view(key.budget_max_tokens, key.budget_max_cost),
    }


def evidence_view(row: EvidenceRow) -> dict[str, Any]:
    return {
        "request_id": row.request_id,
        "key_id": row.key_id,
        "mint_decision_id": row.mint_decision_id,
        "account_id": row.account_id,
        "requested_model": row.requested_model,
        "served_model": row.served_model,
        "endpoint": row.endpoint,
        "stream": row.stream,
        "upstream_status": row.upstream_status,
        "outcome": row.outcome,
        "refusal_reason": row.refusal_reason,
        "error_code": row.error_code,
        "scope": row.scope,
        "qualifying": row.qualifying,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cache_read_input_tokens": row.cache_read_input_tokens,
        "cache_creation_input_tokens": row.cache_creation_input_tokens,
        "malformed_chunks": row.malformed_chunks,
        "cost": money(row.cost),
        "started_at": _time(row.started_at),
        "first_byte_ms": row.first_byte_ms,
        "duration_ms": row.duration_ms,
    }


def decision_view(decision: MintDecision, evidence: Sequence[EvidenceRow]) -> dict[str, Any]:
    retry_of = decision.cites_decision_id if decision.kind == "retry" else None
    supersedes = decision.cites_decision_id if decision.kind == "supersede" else None
    renews = decision.cites_decision_id if decision.kind == "renewal" else None
    return {
        "mint_decision_id": decision.id,
        "created_at": _time(decision.created_at),
        "lineage": {
            "tenant": decision.tenant,
            "dispatch_id": decision.dispatch_id,
            "model": decision.model,
        },
        "role": decision.role,
        "kind": decision.kind,
        "outcome": decision.outcome,
        "refusal_code": decision.refusal_code,
        "account_id": decision.account_id,
        "served_model": decision.served_model,
        "fallback_position": decision.fallback_position,
        "hop": decision.hop,
        "passed_over": passed_over_view(decision.passed_over),
        "key_id": decision.key_id,
        "retry_of_mint_decision_id": retry_of,
        "supersedes_mint_decision_id": supersedes,
        "renews_mint_decision_id": renews,
        "successor_mint_decision_id": decision.successor_id,
        "authorised_by_request_id": decision.authorised_by_request_id,
        "chain_id": decision.chain_id,
        "budget": budget_view(decision.budget_max_tokens, decision.budget_max_cost),
        "evidence": [evidence_view(row) for row in evidence],
    }


def mint_view(decision: MintDecision, token: str | None, key: KeyRecord) -> dict[str, Any]:
    """`token` is None for an idempotent replay: the secret is shown once, never again."""
    return {
        "key": token,
        "key_id": key.key_id,
        "mint_decision_id": decision.id,
        "account_id": key.account_id,
        "model": key.model,
        "served_model": key.served_model,
        "fallback_position": decision.fallback_position,
        "hop": decision.hop,
        "expires_at": _time(key.expires_at),
        "passed_over": passed_over_view(decision.passed_over),
        "chain_id": key.chain_id,
        "budget": budget_view(key.budget_max_tokens, key.budget_max_cost),
    }


def budget_view(max_tokens: int | None, max_cost: Decimal | None) -> dict[str, Any] | None:
    if max_tokens is None and max_cost is None:
        return None
    return {"max_tokens": max_tokens, "max_cost": money(max_cost)}


def money(value: Decimal | None) -> str | None:
    """Money travels as a decimal string, never a JSON number (no float ever touches it)."""
    return None if value is None else format(value.normalize(), "f")
