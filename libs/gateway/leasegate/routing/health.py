"""The pure health state machine, shared by every health store, and selection's view of it.

One `HealthState` tracks either an (account, served model) pair against the failure
threshold, or an account circuit against the account failure threshold:

    healthy   --failure x threshold--> cooling (trips=1, until=now+window)
    cooling   --failure--------------> cooling (ignored: a cooldown is never extended)
    cooling   --success--------------> cooling (streak=0; the cooldown and its trips stay)
    cooling   --time passes----------> half-open (trips>0, until<=now)
    half-open --admit----------------> trial (until=now+window, trial=True): the one request
                                       let through; every other one is refused until it ends
    trial     --trial success--------> healthy (trips=0: "recovered")
    trial     --trial failure--------> cooling (trips+1, until=now+window)
    trial     --time passes----------> half-open (a trial that never reported frees the slot)
    half-open --failure--------------> cooling (trips+1, at once: no new streak needed)
    half-open --success--------------> healthy ("recovered")
    healthy   --success--------------> healthy (streak=0)

The window does not grow with the trips: `window = base x (1 - jitter)`, raised to the
upstream's `Retry-After`, capped at the maximum. Cost of a pair that keeps failing: at most
one trial per window, across every proxy (the store admits it atomically); delay before a
recovered pair carries traffic again: at most one base window. `jitter` is a fraction the
store draws per window, so pairs tripped together do not all come back at the same instant.

A success while a cooldown is active can only come from a request admitted before the trip;
it says nothing about the upstream *now*, so it must not cut the cooldown short. The trial's
own success is the exception: it was admitted after the window ended.

Eligibility is one rule: a state blocks while `HealthState.active`, and of an account's
circuit and a pair, the circuit blocks first (`blocking`). Selection (through `health_block`,
on a snapshot) and the proxy's admission (the store's `admit`) both ask only that.

The Redis store runs the same machine in Lua (`leasegate.kv.health_redis`); the contract
suite in tests/contract proves the two agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from leasegate.core.ports.health import (
    Cooldown,
    HealthPolicy,
    HealthSnapshot,
    HealthTransition,
    TransitionKind,
)

Change = Literal["tripped", "recovered"]
Admission = Literal["pass", "trial", "blocked"]
AccountHealth = Literal["healthy", "cooling", "circuit-open"]


@dataclass(frozen=True, slots=True)
class HealthState:
    streak: int = 0
    """Consecutive failures since the last success or trip."""
    trips: int = 0
    """Cooldowns started since the last recovery; > 0 after expiry: half-open."""
    until: float = 0.0
    """Epoch seconds the current cooldown (or trial window) ends; 0 if it never tripped."""
    reason: str = ""
    """The reason of the failure that last tripped it."""
    trial: bool = False
    """A trial request was admitted and `until` is the end of its window."""

    def active(self, now: float) -> bool:
        """Whether requests are refused: the one eligibility rule, for selection and proxy."""
        return self.until > now


HEALTHY = HealthState()


def cooldown_s(base_s: float, max_s: float, retry_after_s: float | None, jitter: float) -> float:
    """min(max, max(base x (1 - jitter), Retry-After)): the window, shortened by the drawn
    jitter fraction (0 <= jitter < 1), the upstream's hint honoured but never beyond the cap."""
    window = base_s * (1.0 - jitter)
    return min(max_s, max(window, retry_after_s or 0.0))


def drawn_cooldown_s(
    policy: HealthPolicy,
    retry_after_s: float | None,
    rng: Callable[[], float],
    *,
    overloaded: bool = False,
) -> float:
    """The window a store opens now: `cooldown_s` with the policy's bounds and a jitter
    fraction drawn from `rng` (uniform in [0, 1)), none drawn when the policy has no jitter.
    An overload's base is the policy's short `overload_cooldown_s` (never above the base)."""
    jitter = policy.jitter * rng() if policy.jitter else 0.0
    base = policy.base_cooldown_s
    if overloaded:
        base = min(base, policy.overload_cooldown_s)
    return cooldown_s(base, policy.max_cooldown_s, retry_after_s, jitter)


def admit(state: HealthState, now: float, window_s: float) -> tuple[HealthState, Admission]:
    """May a request go to the upstream now? A half-open state lets exactly one through (the
    trial) and closes behind it for `window_s`."""
    if state.active(now):
        return state, "blocked"
    if state.trips == 0:
        return state, "pass"
    return replace(state, until=now + window_s, trial=True), "trial"


def on_failure(
    state: HealthState,
    now: float,
    *,
    threshold: int,
    cooldown_s: float,
    reason: str,
    trial: bool = False,
) -> tuple[HealthState, Change | None]:
    """`trial`: the failure is the outcome of a request `admit` let through as the trial."""
    if state.active(now) and not (trial and state.trial):
        return state, None
    if state.trips == 0 and state.streak + 1 < threshold:
        return replace(state, streak=state.streak + 1), None
    trips = state.trips + 1
    return HealthState(trips=trips, until=now + cooldown_s, reason=reason), "tripped"


def on_success(
    state: HealthState, now: float, *, trial: bool = False
) -> tuple[HealthState, Change | None]:
    if state.active(now) and not (trial and state.trial):
        return replace(state, streak=0), None
    return HEALTHY, ("recovered" if state.trips > 0 else None)


def transition(
    change: Change, account_id: str, model: str | None, state: HealthState
) -> HealthTransition:
    """The event for a change; `state` is the state after a trip or before a recovery."""
    circuit = model is None
    kind: TransitionKind
    if change == "tripped":
        kind = "circuit-opened" if circuit else "cooldown-started"
        return HealthTransition(kind, account_id, model, state.reason, state.until, state.trips)
    kind = "circuit-closed" if circuit else "cooldown-ended"
    return HealthTransition(kind, account_id, model, state.reason, None, state.trips)


def active_cooldown(
    account_id: str, model: str | None, state: HealthState, now: float
) -> Cooldown | None:
    if not state.active(now):
        return None
    return Cooldown(account_id, model, state.until, state.reason, state.trips)


# -- selection's view ---------------------------------------------------------------------


BlockCode = Literal["circuit-open", "model-cooling"]


def block_code(cooldown: Cooldown) -> BlockCode:
    """The refusal code of a blocking cooldown, at mint and at the proxy alike."""
    return "circuit-open" if cooldown.model is None else "model-cooling"


def blocking(circuit: Cooldown | None, pair: Cooldown | None) -> Cooldown | None:
    """The one health eligibility rule, at mint and at the proxy: given the account circuit's
    and the (account, served model) pair's active cooldowns, the one that refuses a request,
    the circuit first; None: eligible. (The Redis store's admission script, which cannot call
    Python, checks in the same order; the contract suite holds it to the in-process store.)"""
    return circuit or pair


def health_block(
    snapshot: HealthSnapshot, account_id: str, served_model: str
) -> tuple[BlockCode, Cooldown] | None:
    """Selection filters 4 and 5 on a snapshot: `blocking` and its refusal code."""
    found = blocking(snapshot.circuit(account_id), snapshot.cooling_for(account_id, served_model))
    return None if found is None else (block_code(found), found)


def account_health(snapshot: HealthSnapshot, account_id: str) -> AccountHealth:
    if snapshot.circuit(account_id) is not None:
        return "circuit-open"
    return "cooling" if snapshot.cooling_models(account_id) else "healthy"
