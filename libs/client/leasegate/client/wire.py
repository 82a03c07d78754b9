"""Requests and answers of the control plane, shared by the sync and the async client.

Each call is an `Operation`: what to send and how to read a successful answer. Building one
and reading its answer are pure; `ControlClient` and `AsyncControlClient` only move bytes.
A request body is the control plane's own model (`leasegate.wire`: `MintBody`, `RenewBody`,
`StateBody`, `TenantBudgetBody`), built here from the builder's arguments: a body the control
plane would refuse for its shape (a field out of bounds, `clear` with a bound) raises
pydantic's `ValidationError` (a `ValueError`) before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from leasegate.client import parse
from leasegate.client.errors import GatewayRefusal, Held, ProtocolError, Rejected
from leasegate.client.records import Accounts, Decision, Evidence, KeyInfo, Minted
from leasegate.core.records import AdminState
from leasegate.core.retry_after import retry_after_seconds
from leasegate.wire import (
    AccountStateChanged,
    AuditReport,
    Budget,
    BudgetBody,
    ErrorBody,
    MintBody,
    RenewBody,
    RequestBody,
    StateBody,
    TenantBudgetBody,
    TenantBudgetChanged,
    Tenants,
    UsageReport,
    money,
)
from leasegate.wire.headers import CONTEXT_FALLBACK_HEADER

T = TypeVar("T")
PREFIX = "/control/v2"


@dataclass(frozen=True, slots=True)
class Operation(Generic[T]):
    method: str
    path: str
    """Below the control plane's base URL, starting with /control/v2."""
    read: Callable[[int, Any], T]
    """Reads the decoded JSON of a successful answer (None for an empty body), given its
    status."""
    ok: frozenset[int] = frozenset({200})
    body: RequestBody | None = None
    params: Mapping[str, str | int] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any] | None:
        """The body as sent: every field but those left at their default (the server fills
        them in alike), so an older server is never sent a field it does not know unless the
        caller set it."""
        return (
            None if self.body is None else self.body.model_dump(mode="json", exclude_defaults=True)
        )


def _segment(value: str) -> str:
    return quote(value, safe="")


def _tuple(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return tuple(values) if values is not None else None


def budget_body(budget: Budget | None) -> BudgetBody | None:
    """The client's `Budget` (money a `Decimal`) as the mint body carries it (a string)."""
    if budget is None:
        return None
    return BudgetBody(max_tokens=budget.max_tokens, max_cost=money(budget.max_cost))


def mint(
    tenant: str,
    dispatch_id: str,
    model: str,
    *,
    role: str | None = None,
    ttl_s: int | None = None,
    retry_of_mint_decision_id: str | None = None,
    supersedes_mint_decision_id: str | None = None,
    budget: Budget | None = None,
    idempotency_key: str | None = None,
    affinity: str | None = None,
    allowed_providers: Sequence[str] | None = None,
    allowed_regions: Sequence[str] | None = None,
) -> Operation[Minted]:
    """`POST /keys`: a key on one account for the dispatch (201), or the replay of the mint
    an `idempotency_key` already made (200, `replayed`)."""
    body = MintBody(
        tenant=tenant,
        dispatch_id=dispatch_id,
        model=model,
        role=role,
        ttl_s=ttl_s,
        retry_of_mint_decision_id=retry_of_mint_decision_id,
        supersedes_mint_decision_id=supersedes_mint_decision_id,
        budget=budget_body(budget),
        affinity=affinity,
        allowed_providers=_tuple(allowed_providers),
        allowed_regions=_tuple(allowed_regions),
    )
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    return Operation(
        "POST", f"{PREFIX}/keys", parse.minted, frozenset({200, 201}), body, headers=headers
    )


def revoke(key_id: str) -> Operation[None]:
    return Operation(
        "DELETE", f"{PREFIX}/keys/{_segment(key_id)}", lambda _s, _b: None, frozenset({204})
    )


def renew(key_id: str, ttl_s: int | None = None) -> Operation[Minted]:
    body = RenewBody(ttl_s=ttl_s)
    return Operation(
        "POST", f"{PREFIX}/keys/{_segment(key_id)}/renew", parse.minted, frozenset({201}), body
    )


def get_key(key_id: str) -> Operation[KeyInfo]:
    return Operation("GET", f"{PREFIX}/keys/{_segment(key_id)}", lambda _s, b: parse.key_info(b))


def decision(decision_id: str) -> Operation[Decision]:
    return Operation(
        "GET", f"{PREFIX}/decisions/{_segment(decision_id)}", lambda _s, b: parse.decision(b)
    )


def decisions(tenant: str, dispatch_id: str) -> Operation[tuple[Decision, ...]]:
    return Operation(
        "GET",
        f"{PREFIX}/decisions",
        lambda _s, b: parse.decision_list(b),
        params={"tenant": tenant, "dispatch_id": dispatch_id},
    )


def evidence(
    *,
    decision_id: str | None = None,
    account_id: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> Operation[tuple[Evidence, ...]]:
    params: dict[str, str | int] = {"limit": limit}
    if decision_id is not None:
        params["decision_id"] = decision_id
    if account_id is not None:
        params["account_id"] = account_id
    if since is not None:
        params["since"] = since.isoformat()
    return Operation(
        "GET", f"{PREFIX}/evidence", lambda _s, b: parse.evidence_list(b), params=params
    )


def accounts() -> Operation[Accounts]:
    return Operation("GET", f"{PREFIX}/accounts", lambda _s, b: parse.accounts(b))


def account(account_id: str) -> Operation[Accounts]:
    return Operation(
        "GET", f"{PREFIX}/accounts/{_segment(account_id)}", lambda _s, b: parse.accounts(b)
    )


def set_account_state(
    account_id: str,
    state: AdminState,
    *,
    expected_revision: int,
    reason: str,
    on_behalf_of: str | None = None,
) -> Operation[AccountStateChanged]:
    """`POST /accounts/{id}/state` (admin token): the account as it is now, the keys the
    change revoked and the audit record it appended."""
    body = StateBody(
        state=state,
        expected_revision=expected_revision,
        reason=reason,
        on_behalf_of=on_behalf_of,
    )
    return Operation(
        "POST",
        f"{PREFIX}/accounts/{_segment(account_id)}/state",
        lambda _s, b: AccountStateChanged.model_validate(b),
        body=body,
    )


def audit() -> Operation[AuditReport]:
    """`GET /audit`: the admin chain verified (admin token)."""
    return Operation("GET", f"{PREFIX}/audit", lambda _s, b: AuditReport.model_validate(b))


def tenants() -> Operation[Tenants]:
    """`GET /tenants`: every budgeted tenant with its spend this period (admin token)."""
    return Operation("GET", f"{PREFIX}/tenants", lambda _s, b: Tenants.model_validate(b))


def set_tenant_budget(
    tenant: str,
    *,
    expected_revision: int,
    reason: str,
    period: Literal["day", "month"] | None = None,
    max_tokens: int | None = None,
    max_cost: Decimal | None = None,
    clear: bool = False,
    on_behalf_of: str | None = None,
) -> Operation[TenantBudgetChanged]:
    """`POST /tenants/{tenant}/budget`: a `period` and at least one bound, or `clear=True`
    alone (admin token). The tenant may contain `/`: it is part of the path as it is."""
    body = TenantBudgetBody(
        expected_revision=expected_revision,
        reason=reason,
        on_behalf_of=on_behalf_of,
        period=period,
        max_tokens=max_tokens,
        max_cost=money(max_cost),
        clear=clear,
    )
    return Operation(
        "POST",
        f"{PREFIX}/tenants/{quote(tenant, safe='/')}/budget",
        lambda _s, b: TenantBudgetChanged.model_validate(b),
        body=body,
    )


def usage(
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    group_by: Sequence[str] = ("account", "model"),
    limit: int = 100,
    offset: int = 0,
) -> Operation[UsageReport]:
    """`GET /usage`: one page of tokens, cost and requests per group (`next_offset` names the
    next page). Without `since`: today (UTC) so far."""
    params: dict[str, str | int] = {"group_by": ",".join(group_by), "limit": limit}
    if offset:
        params["offset"] = offset
    if since is not None:
        params["since"] = since.isoformat()
    if until is not None:
        params["until"] = until.isoformat()
    return Operation(
        "GET", f"{PREFIX}/usage", lambda _s, b: UsageReport.model_validate(b), params=params
    )


def outcome(op: Operation[T], status: int, headers: Mapping[str, str], content: bytes) -> T:
    """The operation's result, or the refusal the gateway answered, raised."""
    decoded = _decode(content)
    if status not in op.ok:
        raise refusal(status, headers, decoded)
    try:
        return op.read(status, decoded)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"{op.method} {op.path}: unreadable {status} answer") from exc


def _decode(content: bytes) -> Any:
    if not content.strip():
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class FailedAnswer:
    """What an error answer through the proxy says: the gateway's own envelope (`gateway`), or
    an upstream's error object, which the proxy passes through unchanged."""

    code: str | None
    message: str
    gateway: bool
    retry_after_s: float | None
    context_fallback: str | None


def failed_answer(error: object, headers: Mapping[str, str] | None) -> FailedAnswer:
    """Read an error object (the `error` of a body, or a whole body that has none) and the
    answer's headers. Only the gateway's envelope carries a `disposition`; it is read with its
    model. A wait is the envelope's, else the headers' (`retry_after_seconds`)."""
    wait = retry_after_seconds(headers) if headers is not None else None
    fallback = headers.get(CONTEXT_FALLBACK_HEADER) if headers is not None else None
    if not isinstance(error, Mapping):
        return FailedAnswer(None, "", False, wait, fallback)
    if "disposition" in error:
        body = _error_body(error)
        if body.retry_after_s is not None:
            wait = float(body.retry_after_s)
        return FailedAnswer(body.code, body.message, True, wait, fallback)
    raw = error.get("code") or error.get("type")
    code = str(raw) if raw is not None else None
    return FailedAnswer(code, str(error.get("message") or ""), False, wait, fallback)


def _error_body(error: Mapping[str, Any]) -> ErrorBody:
    try:
        return ErrorBody.model_validate(error)
    except ValueError:  # pydantic's ValidationError: an odd field; the four every refusal has
        core = {name: error[name] for name in ("code", "message", "disposition") if name in error}
        try:
            return ErrorBody.model_validate(core)
        except ValueError:
            return ErrorBody(code=str(error.get("code") or "unknown"))


def refusal(status: int, headers: Mapping[str, str], decoded: Any) -> GatewayRefusal:
    """The typed error for a non-success answer: the envelope's fields when there is one."""
    error = decoded.get("error") if isinstance(decoded, Mapping) else None
    if not isinstance(error, Mapping):
        return GatewayRefusal(status, "unknown", f"HTTP {status} without an error envelope")
    body = _error_body(error)
    kind = {"held": Held, "rejected": Rejected}.get(body.disposition or "", GatewayRefusal)
    retry_after = body.retry_after_s
    return kind(
        status,
        body.code,
        body.message,
        disposition=body.disposition,
        retry_after_s=float(retry_after)
        if retry_after is not None
        else retry_after_seconds(headers),
        passed_over=tuple(body.passed_over),
        cooldown_scope=body.cooldown_scope,
        mint_decision_id=body.mint_decision_id,
        envelope=error,
    )
