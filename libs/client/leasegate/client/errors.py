"""Everything the client raises, as one tree:

LeasegateError              anything this package raises on purpose
  GatewayRefusal            the gateway answered with its error envelope (SPEC §3)
    .status .code .message  HTTP status and the kebab-case code
    .disposition            "held" (may succeed later unchanged) | "rejected" | None
    .retry_after_s          when a held refusal may succeed, if the gateway knows
    .passed_over            selection's pass-over codes, for no-eligible-account
    .mint_decision_id       the decision a refused mint recorded
    Held                    disposition "held"
    Rejected                disposition "rejected"
  ControlUnreachable        no answer from the control plane (connect, timeout, cut):
                            a mint may still have happened (replay its Idempotency-Key)
  ProtocolError             an answer that is neither the expected shape nor the envelope
  ProxyFailure              a proxied call failed (the plain-httpx helpers in `proxy`)
  DispatchFailed            a Dispatch ended without an answer: `.refusal`, `.failure`, `.chain`
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from leasegate.client.records import Link, PassOver


class LeasegateError(Exception):
    """Base of every error this client raises on purpose."""


class GatewayRefusal(LeasegateError):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        disposition: Literal["held", "rejected"] | None = None,
        retry_after_s: float | None = None,
        passed_over: tuple[PassOver, ...] = (),
        cooldown_scope: str | None = None,
        mint_decision_id: str | None = None,
        envelope: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.disposition = disposition
        self.retry_after_s = retry_after_s
        self.passed_over = passed_over
        self.cooldown_scope = cooldown_scope
        self.mint_decision_id = mint_decision_id
        self.envelope: Mapping[str, Any] = envelope or {}
        """The whole `error` object, for fields only some codes carry
        (e.g. `successor_mint_decision_id`, `original_mint_decision_id`)."""

    @property
    def held(self) -> bool:
        return self.disposition == "held"


class Held(GatewayRefusal):
    """A refusal that may succeed later unchanged (`retry_after_s` says when, if known)."""


class Rejected(GatewayRefusal):
    """A refusal that never will: change the request."""


class ControlUnreachable(LeasegateError):
    """The control plane gave no answer; the cause is the transport error."""


class ProtocolError(LeasegateError):
    """The gateway answered something this client cannot read."""


class ProxyFailure(LeasegateError):
    """A call through the proxy failed: a non-2xx answer, or an error event inside a stream
    (`status` 200 then). `code` is the gateway's code or the upstream's, when one was sent."""

    def __init__(
        self,
        status: int,
        code: str | None,
        message: str,
        *,
        retry_after_s: float | None = None,
        gateway: bool = False,
        context_fallback: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code or 'error'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
        self.gateway = gateway
        """True when the gateway itself refused (its envelope), not the upstream."""
        self.context_fallback = context_fallback
        """The model the proxy says to hop to: the request exceeded this model's context."""


DispatchEnd = Literal["refused", "call-failed", "deadline"]


class DispatchFailed(LeasegateError):
    """A Dispatch gave up. `reason` says why; `refusal` is the last refusal of the gateway
    (the one that ended it when `reason` is "refused"), `failure` the last failed call."""

    def __init__(
        self,
        reason: DispatchEnd,
        message: str,
        *,
        chain: tuple[Link, ...],
        refusal: GatewayRefusal | None = None,
        failure: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.reason: DispatchEnd = reason
        self.chain = chain
        self.refusal = refusal
        self.failure = failure

    @property
    def code(self) -> str | None:
        """The last refusal's code, if the gateway refused anything."""
        return self.refusal.code if self.refusal is not None else None
