"""Records -> their wire models (`leasegate.wire`). Secrets never: a key's hash is not part of
any view, and the secret itself only of a fresh mint's answer."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from leasegate.audit import ACCOUNT_STATE, AuditRecord
from leasegate.core.errors import PassOver
from leasegate.core.records import EvidenceRow, KeyRecord, MintDecision
from leasegate.wire import (
    AccountStateRecord,
    AuditRecordView,
    Budget,
    Decision,
    Evidence,
    KeyInfo,
    Lineage,
    MintAnswer,
    TenantBudgetRecord,
)
from leasegate.wire import PassOver as PassOverView


def passed_over_view(passed: Sequence[PassOver]) -> tuple[PassOverView, ...]:
    return tuple(PassOverView(account_id=p.account_id, code=p.code) for p in passed)


def key_view(key: KeyRecord, now: datetime) -> KeyInfo:
    return KeyInfo(
        key_id=key.key_id,
        state=key.state(now),
        mint_decision_id=key.mint_decision_id,
        tenant=key.tenant,
        dispatch_id=key.dispatch_id,
        account_id=key.account_id,
        model=key.model,
        served_model=key.served_model,
        created_at=key.created_at,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
        revoke_reason=key.revoke_reason,
        chain_id=key.chain_id,
        budget=budget_view(key.budget_max_tokens, key.budget_max_cost),
    )


def evidence_view(row: EvidenceRow) -> Evidence:
    """Every field of the row, by its own name (the wire model and the row share them)."""
    return Evidence.model_validate(row, from_attributes=True)


def decision_view(decision: MintDecision, evidence: Sequence[EvidenceRow]) -> Decision:
    retry_of = decision.cites_decision_id if decision.kind == "retry" else None
    supersedes = decision.cites_decision_id if decision.kind == "supersede" else None
    renews = decision.cites_decision_id if decision.kind == "renewal" else None
    return Decision(
        mint_decision_id=decision.id,
        created_at=decision.created_at,
        lineage=Lineage(
            tenant=decision.tenant, dispatch_id=decision.dispatch_id, model=decision.model
        ),
        role=decision.role,
        kind=decision.kind,
        outcome=decision.outcome,
        refusal_code=decision.refusal_code,
        account_id=decision.account_id,
        served_model=decision.served_model,
        fallback_position=decision.fallback_position,
        hop=decision.hop,
        passed_over=passed_over_view(decision.passed_over),
        key_id=decision.key_id,
        retry_of_mint_decision_id=retry_of,
        supersedes_mint_decision_id=supersedes,
        renews_mint_decision_id=renews,
        successor_mint_decision_id=decision.successor_id,
        authorised_by_request_id=decision.authorised_by_request_id,
        chain_id=decision.chain_id,
        budget=budget_view(decision.budget_max_tokens, decision.budget_max_cost),
        affinity=decision.affinity,
        affinity_hit=decision.affinity_hit,
        affinity_miss=affinity_miss_view(decision),
        allowed_providers=decision.allowed_providers,
        allowed_regions=decision.allowed_regions,
        evidence=tuple(evidence_view(row) for row in evidence),
    )


def mint_view(decision: MintDecision, token: str | None, key: KeyRecord) -> MintAnswer:
    """`token` is None for an idempotent replay: the secret is shown once, never again."""
    if decision.fallback_position is None:
        raise ValueError("only a selected decision hands out a key")
    return MintAnswer(
        key=token,
        key_id=key.key_id,
        mint_decision_id=decision.id,
        account_id=key.account_id,
        model=key.model,
        served_model=key.served_model,
        fallback_position=decision.fallback_position,
        hop=decision.hop,
        expires_at=key.expires_at,
        passed_over=passed_over_view(decision.passed_over),
        chain_id=key.chain_id,
        budget=budget_view(key.budget_max_tokens, key.budget_max_cost),
        affinity_hit=decision.affinity_hit,
        affinity_miss=affinity_miss_view(decision),
    )


def affinity_miss_view(decision: MintDecision) -> PassOverView | None:
    account, code = decision.affinity_miss_account_id, decision.affinity_miss_code
    if account is None or code is None:
        return None
    return PassOverView(account_id=account, code=code)


def budget_view(max_tokens: int | None, max_cost: Decimal | None) -> Budget | None:
    if max_tokens is None and max_cost is None:
        return None
    return Budget(max_tokens=max_tokens, max_cost=max_cost)


def record_view(record: AuditRecord) -> AuditRecordView:
    """An audit record by its kind's model; the fields share the record's names."""
    if record.kind == ACCOUNT_STATE:
        return AccountStateRecord.model_validate(record, from_attributes=True)
    return TenantBudgetRecord.model_validate(record, from_attributes=True)
