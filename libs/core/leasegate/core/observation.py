"""What the proxy observed when a request ended: the failure classifier's only input.

Built from the upstream's status line, its *error* payload (`type`/`code`), stream events,
transport exceptions and the gateway's own refusals. Never from a request body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leasegate.core.records import Outcome, Scope

ObservationKind = Literal[
    "response",  # the upstream answered and the body or stream ended normally
    "stream-error",  # an error event inside a 2xx stream (OpenAI `error` object, `event: error`)
    "truncated",  # a 2xx stream closed with no finish reason / message_stop
    "timeout",  # headers, first-token, idle or read timeout
    "connect-error",  # connect, DNS or TLS failure, or a reset before the request went out
    "dropped",  # the connection was lost after the request went out, before a status line
    "client-abort",  # the caller went away
    "gateway-shutdown",  # the gateway stopped past its drain time and cut the stream
    "refused",  # the gateway refused before or instead of calling the upstream
]


@dataclass(frozen=True, slots=True)
class Observation:
    kind: ObservationKind
    status: int | None = None
    """The upstream's HTTP status, when headers arrived."""
    error_type: str | None = None
    """`error.type` from the upstream's error payload or event, if any."""
    error_code: str | None = None
    """`error.code` from the upstream's error payload or event, if any (stringified)."""
    refusal_code: str | None = None
    """For kind == "refused": the gateway's own code (e.g. `model-cooling`)."""
    retry_after_s: float | None = None
    """The upstream's Retry-After, in seconds, when it sent one; for kind == "refused", the
    gateway's own."""
    context_length: bool = False
    """The error payload says the request exceeded the model's context window."""
    rate_limit_wait_s: float | None = None
    """For a 429: how long its headers ask to wait (`retry-after-ms`, `retry-after`, else the
    reset of an empty rate-limit bucket); None when they say nothing."""


@dataclass(frozen=True, slots=True)
class Classification:
    outcome: Outcome
    scope: Scope | None
    """model: cools (account, served model); account: feeds the account circuit; None: neither."""
    qualifying: bool
    """Whether this terminal row can license a fallback hop."""
    reason: str | None = None
    """A short machine string for the evidence row's error_code and a cooldown's reason,
    e.g. `http-429`, `overloaded_error`, `insufficient_quota`, `connect-error`."""
    resets_streak: bool = False
    """A success resets the (account, served model) failure streak."""
    rate_limited: bool = False
    """The upstream's 429 was a rate limit: the pair waits for its quota (the proxy's quota
    view), and neither its failure streak nor the account circuit hears of it."""
    overloaded: bool = False
    """The upstream said it is overloaded (Anthropic's 529): a model-scope failure whose
    cooldown is the short overload window, not the base one."""

    @property
    def citable(self) -> bool:
        """A hop may cite this row: a qualifying failure, or a context-length failure (the
        licence of a context fallback). Its row is written before the caller hears of it."""
        return self.qualifying or self.outcome == "context-length-exceeded"

    @property
    def health_scope(self) -> Scope | None:
        """The scope the health store counts: a context-length failure has model scope on its
        row but is no health failure (the request, not the upstream, was too big); nor is a
        rate limit (the provider's quota, not a fault)."""
        if self.rate_limited or self.outcome == "context-length-exceeded":
            return None
        return self.scope
