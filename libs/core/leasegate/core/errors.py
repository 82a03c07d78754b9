"""The one error type every refusal travels as, and the table of codes it may carry.

    GatewayError            an expected refusal: rendered as the envelope, never a 500
      .code                 a kebab-case code from CODES (status, type, disposition)
      .retry_after_s        when a held refusal may succeed unchanged
      .passed_over          selection's pass-over codes, when selection refused
      .cooldown_scope       model | account | mixed, for no-eligible-account
      .mint_decision_id     the decision a refused mint recorded

Anything else that escapes a handler is a bug: it is logged and answered 500 `internal`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from leasegate.core import envelope
from leasegate.core.envelope import Disposition, Envelope, ErrorBody


@dataclass(frozen=True, slots=True)
class CodeInfo:
    status: int
    type: str
    disposition: Disposition | None = None


_AUTH = "authentication_error"
_PERM = "permission_error"
_INVALID = "invalid_request_error"
_NOT_FOUND = "not_found_error"
_CONFLICT = "conflict_error"
_UNAVAILABLE = "service_unavailable"
_RATE = "rate_limit_error"
_UPSTREAM = "upstream_error"
_BUDGET = "budget_exhausted"

CODES: dict[str, CodeInfo] = {
    # request shape and auth, both services
    "invalid-request": CodeInfo(400, _INVALID, "rejected"),
    "request-timeout": CodeInfo(408, _INVALID, "rejected"),
    "unauthenticated": CodeInfo(401, _AUTH, "rejected"),
    "too-many-failed-authentications": CodeInfo(429, _RATE, "held"),
    "forbidden": CodeInfo(403, _PERM, "rejected"),
    "not-found": CodeInfo(404, _NOT_FOUND, "rejected"),
    "method-not-allowed": CodeInfo(405, _INVALID, "rejected"),
    # control plane: mint
    "model-not-served": CodeInfo(404, _NOT_FOUND, "rejected"),
    "no-eligible-account": CodeInfo(503, _UNAVAILABLE, "held"),
    "account-state-unavailable": CodeInfo(503, _UNAVAILABLE, "held"),
    "citation-conflict": CodeInfo(422, _INVALID, "rejected"),
    "dispatch-lease-held": CodeInfo(409, _CONFLICT, "held"),
    "idempotency-key-reused": CodeInfo(422, _INVALID, "rejected"),
    "tenant-fair-share-exceeded": CodeInfo(429, _RATE, "held"),
    # control plane: hops
    "fallback-lineage-unknown": CodeInfo(503, _UNAVAILABLE, "held"),
    "fallback-cited-decision-not-selected": CodeInfo(409, _CONFLICT, "rejected"),
    "fallback-lineage-mismatch": CodeInfo(409, _CONFLICT, "rejected"),
    "fallback-cited-decision-superseded": CodeInfo(409, _CONFLICT, "rejected"),
    "fallback-response-was-not-lost": CodeInfo(409, _CONFLICT, "rejected"),
    "fallback-context-length-exceeded": CodeInfo(409, _CONFLICT, "rejected"),
    "fallback-lease-still-held": CodeInfo(503, _UNAVAILABLE, "held"),
    "fallback-not-authorised": CodeInfo(503, _UNAVAILABLE, "held"),
    "fallback-budget-exhausted": CodeInfo(503, _UNAVAILABLE, "held"),
    # control plane: keys, decisions, accounts
    "key-not-found": CodeInfo(404, _NOT_FOUND, "rejected"),
    "key-not-live": CodeInfo(409, _CONFLICT, "rejected"),
    "decision-not-found": CodeInfo(404, _NOT_FOUND, "rejected"),
    "account-not-found": CodeInfo(404, _NOT_FOUND, "rejected"),
    "revision-conflict": CodeInfo(409, _CONFLICT, "rejected"),
    "audit-chain-corrupt": CodeInfo(503, _UNAVAILABLE, "held"),
    # renewal refused by a selection filter: 409 with the filter's code (the renewal
    # passes status=409 for circuit-open, whose default is the proxy's 503)
    "not-configured": CodeInfo(409, _CONFLICT, "rejected"),
    "administratively-disabled": CodeInfo(409, _CONFLICT, "rejected"),
    "administratively-draining": CodeInfo(409, _CONFLICT, "rejected"),
    "lease-capacity-exhausted": CodeInfo(409, _CONFLICT, "held"),
    # proxy refusals
    "key-invalid": CodeInfo(401, _AUTH, "rejected"),
    "key-revoked": CodeInfo(401, _AUTH, "rejected"),
    "key-expired": CodeInfo(401, _AUTH, "rejected"),
    "account-disabled": CodeInfo(403, _PERM, "rejected"),
    "model-not-permitted": CodeInfo(403, _PERM, "rejected"),
    "endpoint-not-served": CodeInfo(404, _NOT_FOUND, "rejected"),
    "request-header-too-large": CodeInfo(431, _INVALID, "rejected"),
    "account-request-capacity-exhausted": CodeInfo(429, _RATE, "held"),
    "account-quota-exhausted": CodeInfo(429, _RATE, "held"),
    # spend ceilings: never a health failure, never qualifying for a hop
    "dispatch-budget-exhausted": CodeInfo(402, _BUDGET, "rejected"),
    "tenant-budget-exhausted": CodeInfo(402, _BUDGET, "held"),
    "budgets-unverifiable": CodeInfo(503, _UNAVAILABLE, "held"),
    "model-cooling": CodeInfo(503, _UNAVAILABLE, "held"),
    "circuit-open": CodeInfo(503, _UNAVAILABLE, "held"),
    "upstream-pool-exhausted": CodeInfo(503, _UNAVAILABLE, "held"),
    "gateway-overloaded": CodeInfo(503, _UNAVAILABLE, "held"),
    "upstream-timeout": CodeInfo(504, _UPSTREAM, "held"),
    "upstream-unreachable": CodeInfo(502, _UPSTREAM, "held"),
    # anything unexpected
    "internal": CodeInfo(500, "api_error", None),
    "unavailable": CodeInfo(503, _UNAVAILABLE, "held"),
}


def retry_after_header(wait_s: float) -> str:
    """The `Retry-After` value for a wait of `wait_s` seconds, the one rule both services use:
    whole seconds rounded up (a client that waits it never comes back early), at least 1."""
    return str(max(1, math.ceil(wait_s)))


@dataclass(frozen=True, slots=True)
class PassOver:
    """One candidate selection skipped, and the first filter that ruled it out."""

    account_id: str
    code: str


class GatewayError(Exception):
    """An expected refusal. `status` and `disposition` default from CODES[code]."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        disposition: Disposition | None = None,
        retry_after_s: float | None = None,
        passed_over: tuple[PassOver, ...] = (),
        cooldown_scope: str | None = None,
        mint_decision_id: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        info = CODES[code]
        self.code = code
        self.message = message
        self.status = status if status is not None else info.status
        self.type = info.type
        self.disposition = disposition if disposition is not None else info.disposition
        self.retry_after_s = retry_after_s
        self.passed_over = passed_over
        self.cooldown_scope = cooldown_scope
        self.mint_decision_id = mint_decision_id
        self.extra = extra or {}

    def body(self) -> Envelope:
        """The refusal as the typed envelope (only the fields it has are set)."""
        fields: dict[str, Any] = {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "disposition": self.disposition,
        }
        if self.retry_after_s is not None:
            fields["retry_after_s"] = round(self.retry_after_s, 3)
        if self.passed_over:
            fields["passed_over"] = [
                envelope.PassOver(account_id=p.account_id, code=p.code) for p in self.passed_over
            ]
        if self.cooldown_scope is not None:
            fields["cooldown_scope"] = self.cooldown_scope
        if self.mint_decision_id is not None:
            fields["mint_decision_id"] = self.mint_decision_id
        fields.update(self.extra)
        return Envelope(error=ErrorBody(**fields))

    def envelope(self) -> dict[str, Any]:
        """The wire shape shared by both services (the OpenAI error shape, extended), as the
        dict a renderer serialises: `body()` rendered."""
        return self.body().render()
