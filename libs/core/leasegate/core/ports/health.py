"""The health store: per (account, served model) cooldowns and per-account circuits.

Selection reads a snapshot for all its candidates at once; the proxy records one
classification per finished request. Times are epoch seconds passed in by the caller, so the
store never reads a clock and expiry needs no sweeper: an entry whose `until` has passed is
simply not active any more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from leasegate.core.observation import Classification
from leasegate.core.ports.fanout import FanoutTrust
from leasegate.core.ports.quota import QuotaNewsBus

TransitionKind = Literal["cooldown-started", "cooldown-ended", "circuit-opened", "circuit-closed"]


@dataclass(frozen=True, slots=True)
class Cooldown:
    """An active cooldown: of one served model on an account, or of the whole account."""

    account_id: str
    model: str | None
    """The served model; None for the account circuit."""
    until: float
    """Epoch seconds at which the cooldown ends."""
    reason: str
    """The classification reason of the failure that tripped it, e.g. `http-429`."""
    trips: int
    """How many times it has tripped since the last success (1 for the first cooldown)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """The proxy may call the upstream; `trial_*`: this request is the one trial let through
    for the pair (or the circuit), and must say so when it records its outcome."""

    trial_pair: bool = False
    trial_circuit: bool = False

    @property
    def trial(self) -> bool:
        return self.trial_pair or self.trial_circuit


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """Only entries active at the snapshot's `now` (until > now)."""

    circuits: Mapping[str, Cooldown]
    cooling: Mapping[tuple[str, str], Cooldown]
    """Keyed by (account_id, served model)."""

    def circuit(self, account_id: str) -> Cooldown | None:
        return self.circuits.get(account_id)

    def cooling_for(self, account_id: str, model: str) -> Cooldown | None:
        return self.cooling.get((account_id, model))

    def cooling_models(self, account_id: str) -> list[Cooldown]:
        """The account's cooling served models, sorted by name (for the accounts view)."""
        found = [c for (acct, _), c in self.cooling.items() if acct == account_id]
        return sorted(found, key=lambda c: c.model or "")


@dataclass(frozen=True, slots=True)
class HealthTransition:
    """A cooldown or circuit that started or ended: one structured event each."""

    kind: TransitionKind
    account_id: str
    model: str | None
    """The served model; None for circuit transitions."""
    reason: str
    until: float | None
    """When a started cooldown ends; None for an ended one."""
    trips: int
    """The trip count the cooldown reached (for an ended one: before the reset)."""


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    failure_threshold: int = 3
    """Consecutive model-scope failures that cool an (account, served model)."""
    account_failure_threshold: int = 2
    """Consecutive account-scope failures that open the account circuit."""
    base_cooldown_s: float = 30.0
    max_cooldown_s: float = 600.0
    jitter: float = 0.0
    """Each cooldown window is shortened by base x a fraction drawn from [0, jitter)."""
    overload_cooldown_s: float = 5.0
    """The base window of an overload (`Classification.overloaded`), instead of base."""

    def __post_init__(self) -> None:
        if self.failure_threshold < 1 or self.account_failure_threshold < 1:
            raise ValueError("failure thresholds must be at least 1")
        if min(self.base_cooldown_s, self.max_cooldown_s, self.overload_cooldown_s) <= 0:
            raise ValueError("cooldowns must be positive")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")

    @property
    def retention_s(self) -> float:
        """How long an entry outlives its cooldown (or its last write) before it is forgotten."""
        return 4 * self.max_cooldown_s


class HealthStore(Protocol):
    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        """Active cooldowns for these (account_id, served_model) pairs and their accounts'
        circuits. One round trip in the Redis implementation."""

    async def admit(self, account_id: str, served_model: str, now: float) -> Admitted | Cooldown:
        """One request's admission, atomic across every process: the blocking cooldown (the
        circuit before the pair), or admitted, claiming the one trial of a half-open circuit or
        pair. One round trip in the Redis implementation."""

    async def record(
        self,
        account_id: str,
        served_model: str,
        classification: Classification,
        retry_after_s: float | None,
        now: float,
        *,
        trial: Admitted | None = None,
    ) -> list[HealthTransition]:
        """Apply one finished request: a success (resets_streak) resets the pair and the
        account circuit; model scope feeds the pair; account scope feeds the circuit; no scope
        changes nothing. `trial`: the request's admission, when it claimed a trial. Returns
        the cooldowns and circuits that started or ended."""

    async def aclose(self) -> None:
        """Release what the store owns."""


@dataclass(frozen=True, slots=True)
class HealthNews:
    """What a proxy tells the others after it recorded a failure on a pair or a circuit."""

    account_id: str
    model: str | None
    """The served model; None for the account circuit."""
    until: float
    """Epoch seconds a cooldown it started (or knows of) ends; 0.0: only a streak grew."""


OnNews = Callable[[Sequence[HealthNews]], None]
OnHealthReset = Callable[[], None]
"""Called when the subscription (re)connects: news may have been missed."""


class HealthFanout(QuotaNewsBus, FanoutTrust, Protocol):
    """Health news from every proxy to every proxy (fire and forget); the same channel
    carries the quota news (`QuotaNewsBus`)."""

    async def publish(self, news: Sequence[HealthNews]) -> None: ...

    @property
    def ready(self) -> bool:
        """False while the subscription is down (news could be missed)."""

    async def subscribe(self, on_news: OnNews, on_reset: OnHealthReset) -> None:
        """Start delivering, in the background if the fan-out needs a connection (`ready`
        then says when it is live); never waits for a store to answer."""

    async def aclose(self) -> None: ...
