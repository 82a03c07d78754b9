"""The in-process health store: the embedded single-process mode's twin of the Redis one.

Every operation runs without an await, so it is atomic on the event loop. Entries are
forgotten `policy.retention_s` after their cooldown ends (or after their last write), exactly
as the Redis keys' TTLs forget them; stale entries are pruned whenever the table has doubled
since the last prune, so nothing accumulates and no background sweeper is needed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from leasegate.core.observation import Classification
from leasegate.core.ports.health import (
    Admitted,
    Cooldown,
    HealthPolicy,
    HealthSnapshot,
    HealthTransition,
)
from leasegate.routing.health import (
    HEALTHY,
    HealthState,
    active_cooldown,
    admit,
    blocking,
    drawn_cooldown_s,
    on_failure,
    on_success,
    transition,
)

# (account_id, served model); the served model is None for the account circuit
_Key = tuple[str, str | None]


@dataclass(frozen=True, slots=True)
class _Stored:
    state: HealthState
    forget_at: float


_SYSTEM_RANDOM = random.SystemRandom()


class InProcessHealthStore:
    def __init__(
        self, policy: HealthPolicy, *, rng: Callable[[], float] = _SYSTEM_RANDOM.random
    ) -> None:
        """`rng`: uniform in [0, 1), scaled by `policy.jitter` for each window drawn."""
        self._policy = policy
        self._rng = rng
        self._entries: dict[_Key, _Stored] = {}
        self._prune_at_size = 1024

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        circuits: dict[str, Cooldown] = {}
        cooling: dict[tuple[str, str], Cooldown] = {}
        for account_id, model in pairs:
            if account_id not in circuits:
                circuit = self._cooldown(account_id, None, now)
                if circuit is not None:
                    circuits[account_id] = circuit
            found = self._cooldown(account_id, model, now)
            if found is not None:
                cooling[(account_id, model)] = found
        return HealthSnapshot(circuits=circuits, cooling=cooling)

    async def admit(self, account_id: str, served_model: str, now: float) -> Admitted | Cooldown:
        keys: tuple[_Key, _Key] = ((account_id, None), (account_id, served_model))
        states = [self.state_of(account_id, model, now) for _, model in keys]
        found = blocking(
            active_cooldown(account_id, None, states[0], now),
            active_cooldown(account_id, served_model, states[1], now),
        )
        if found is not None:
            return found  # nothing claimed
        claimed = []
        for key, state in zip(keys, states, strict=True):
            after, verdict = admit(state, now, self._window(None))
            if verdict == "trial":
                self._write(key, after, now)
            claimed.append(verdict == "trial")
        return Admitted(trial_pair=claimed[1], trial_circuit=claimed[0])

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
        if classification.resets_streak:
            return self._succeed(account_id, served_model, now, trial or Admitted())
        policy = self._policy
        match classification.health_scope:
            case "model":
                key: _Key = (account_id, served_model)
                threshold = policy.failure_threshold
                was_trial = trial is not None and trial.trial_pair
            case "account":
                key = (account_id, None)
                threshold = policy.account_failure_threshold
                was_trial = trial is not None and trial.trial_circuit
            case None:
                return []
        before = self.state_of(account_id, key[1], now)
        state, change = on_failure(
            before,
            now,
            threshold=threshold,
            cooldown_s=self._window(retry_after_s, overloaded=classification.overloaded),
            reason=classification.reason or classification.outcome,
            trial=was_trial,
        )
        if state is before:
            return []  # ignored during an active cooldown: nothing written, TTL unchanged
        self._write(key, state, now)
        return [transition(change, account_id, key[1], state)] if change else []

    def state_of(self, account_id: str, model: str | None, now: float) -> HealthState:
        """The raw machine state (None: the circuit), for diagnostics and tests."""
        stored = self._entries.get((account_id, model))
        if stored is None or stored.forget_at <= now:
            return HEALTHY
        return stored.state

    async def aclose(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _succeed(
        self, account_id: str, model: str, now: float, trial: Admitted
    ) -> list[HealthTransition]:
        transitions = []
        for key, was_trial in (
            ((account_id, model), trial.trial_pair),
            ((account_id, None), trial.trial_circuit),
        ):
            before = self.state_of(account_id, key[1], now)
            after, change = on_success(before, now, trial=was_trial)
            if after == HEALTHY:
                self._entries.pop(key, None)  # healthy is simply absent
            elif after != before:
                # only the streak changed: keep the entry's forget time, as HSET keeps a TTL
                self._entries[key] = _Stored(after, self._entries[key].forget_at)
            if change is not None:
                transitions.append(transition(change, account_id, key[1], before))
        return transitions

    def _window(self, retry_after_s: float | None, *, overloaded: bool = False) -> float:
        return drawn_cooldown_s(self._policy, retry_after_s, self._rng, overloaded=overloaded)

    def _cooldown(self, account_id: str, model: str | None, now: float) -> Cooldown | None:
        return active_cooldown(account_id, model, self.state_of(account_id, model, now), now)

    def _write(self, key: _Key, state: HealthState, now: float) -> None:
        forget_at = max(state.until, now) + self._policy.retention_s
        self._entries[key] = _Stored(state, forget_at)
        if len(self._entries) >= self._prune_at_size:
            self._prune(now)

    def _prune(self, now: float) -> None:
        self._entries = {k: v for k, v in self._entries.items() if v.forget_at > now}
        self._prune_at_size = max(1024, 2 * len(self._entries))
