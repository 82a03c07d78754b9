"""The pure health state machine, shared by every health store, and selection's view of it.

One `HealthState` tracks either an (account, served model) pair against the failure
threshold, or an account circuit against the account failure threshold:

    healthy --failure x threshold--> cooling (trips=1, until=now+cooldown_s(1))
    cooling --failure--------------> cooling (ignored: a cooldown is never extended)
    cooling --success--------------> cooling (streak=0; the cooldown and its trips stay)
    cooling --time passes----------> half-open (trips>0, until<=now)
    half-open --failure------------> cooling (trips+1, the next backoff step, at once)
    half-open --success------------> healthy (trips=0: "recovered", the cooldown has ended)
    healthy --success--------------> healthy (streak=0)

A success while a cooldown is active can only come from a request admitted before the trip;
it says nothing about the upstream *now*, so it must not cut the cooldown short (SPEC §4: "a
success after expiry resets the trips").

The Redis store runs the same machine in Lua (`leasegate.kv.health_redis`); the contract
suite in tests/contract proves the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from leasegate.core.ports.health import (
    Cooldown,
    HealthSnapshot,
    HealthTransition,
    TransitionKind,
)

Change = Literal["tripped", "recovered"]
AccountHealth = Literal["healthy", "cooling", "circuit-open"]

# 2**1000 is still a finite float; beyond it the product would overflow the power operator.
_MAX_EXPONENT = 1000


@dataclass(frozen=True, slots=True)
class HealthState:
    streak: int = 0
    """Consecutive failures since the last success or trip."""
    trips: int = 0
    """Cooldowns started since the last success after expiry; > 0 after expiry: half-open."""
    until: float = 0.0
    """Epoch seconds the current cooldown ends; 0 if it never tripped."""
    reason: str = ""
    """The reason of the failure that last tripped it."""

    def active(self, now: float) -> bool:
        return self.until > now


HEALTHY = HealthState()


def cooldown_s(trips: int, base_s: float, max_s: float, retry_after_s: float | None) -> float:
    """min(max, max(base * 2^(trips-1), Retry-After)): backoff per trip, the upstream's hint
    honoured but never beyond the ceiling."""
    backoff = base_s * 2.0 ** min(max(trips - 1, 0), _MAX_EXPONENT)
    return min(max_s, max(backoff, retry_after_s or 0.0))


def on_failure(
    state: HealthState,
    now: float,
    *,
    threshold: int,
    base_s: float,
    max_s: float,
    retry_after_s: float | None,
    reason: str,
) -> tuple[HealthState, Change | None]:
    if state.active(now):
        return state, None
    half_open = state.trips > 0
    if not half_open and state.streak + 1 < threshold:
        return replace(state, streak=state.streak + 1), None
    trips = state.trips + 1
    until = now + cooldown_s(trips, base_s, max_s, retry_after_s)
    return HealthState(streak=0, trips=trips, until=until, reason=reason), "tripped"


def on_success(state: HealthState, now: float) -> tuple[HealthState, Change | None]:
    if state.active(now):
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


def health_block(
    snapshot: HealthSnapshot, account_id: str, served_model: str
) -> tuple[Literal["circuit-open", "model-cooling"], Cooldown] | None:
    """Selection filters 4 and 5 (and the proxy's refusal): the circuit first, then the pair."""
    circuit = snapshot.circuit(account_id)
    if circuit is not None:
        return "circuit-open", circuit
    cooling = snapshot.cooling_for(account_id, served_model)
    if cooling is not None:
        return "model-cooling", cooling
    return None


def account_health(snapshot: HealthSnapshot, account_id: str) -> AccountHealth:
    if snapshot.circuit(account_id) is not None:
        return "circuit-open"
    return "cooling" if snapshot.cooling_models(account_id) else "healthy"
