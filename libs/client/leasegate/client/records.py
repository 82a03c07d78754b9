"""What the control plane answers, and what a Dispatch hands back, as frozen values.

The answers are the control plane's own wire models (`leasegate.wire`), the very types it
declares as its responses: one definition of every field, read here as sent. Times are
timezone-aware UTC datetimes, money a `Decimal`, durations seconds. Nothing here ever holds
a secret but `Minted.key`, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from leasegate.core.records import KeyState
from leasegate.core.records import MintKind as DecisionKind
from leasegate.wire import (
    Account,
    Accounts,
    Circuit,
    Cooling,
    Decision,
    Evidence,
    KeyInfo,
    MintAnswer,
    PassOver,
    SpendToday,
)

T = TypeVar("T")

__all__ = [
    "Account",
    "Accounts",
    "Circuit",
    "Cooling",
    "Decision",
    "DecisionKind",
    "DispatchResult",
    "Evidence",
    "KeyInfo",
    "KeyState",
    "Link",
    "Minted",
    "PassOver",
    "SpendToday",
]


class Minted(MintAnswer):
    """A mint (or renewal) that took a lease: the control plane's answer, and whether it was
    a replay."""

    replayed: bool = False
    """True for a 200 replay of an earlier mint with the same Idempotency-Key (`key` is then
    None: the secret was shown once)."""


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
