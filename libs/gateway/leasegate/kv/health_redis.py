"""The shared health store on Redis: every update is one Lua script, atomic across processes.

Layout, one hash per entry (fields streak, trips, until, reason, forget, trial), both under the
account's hash tag (`leasegate.kv.keys`), so each script touches one slot of a cluster:

    {prefix}:{acct:<account id>}:health:m:<served model>    an (account, served model) pair
    {prefix}:{acct:<account id>}:health:c                   the account circuit

Every write sets `forget` = max(until, now) + policy.retention_s and the key's TTL to the same
distance, so idle entries vanish on their own. A success deletes both keys, except one whose
cooldown is still active: that keeps its cooldown and trips and only loses its streak. Both
expiries are read against the caller's `now` (an entry past `forget` counts as absent, exactly
as in the in-process store), so correctness never depends on the TTL, Redis's clock or a
sweeper.

The record script is the machine of `leasegate.routing.health` written again in Lua; numbers
travel as `%.17g` strings so both sides compute bit-identical floats.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from leasegate.core.observation import Classification
from leasegate.core.ports.health import (
    Admitted,
    Cooldown,
    HealthPolicy,
    HealthSnapshot,
    HealthTransition,
)
from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient
from leasegate.routing.health import (
    HEALTHY,
    Change,
    HealthState,
    active_cooldown,
    drawn_cooldown_s,
    transition,
)

_SYSTEM_RANDOM = random.SystemRandom()

# Shared by both scripts: the state of one hash, read against the caller's `now`.
_LOAD_LUA = """
local now = tonumber(ARGV[1])
local function num(x) return string.format('%.17g', x) end
local function load(key)
  local v = redis.call('HMGET', key, 'streak', 'trips', 'until', 'reason', 'forget', 'trial')
  if (tonumber(v[5]) or 0) <= now then
    return 0, 0, 0, '', false
  end
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, v[4] or '', v[6] == '1'
end
local function keep(key, till, retention)
  local forget = math.max(till, now) + retention
  redis.call('HSET', key, 'forget', num(forget))
  redis.call('PEXPIRE', key, math.ceil((forget - now) * 1000))
end
"""

# KEYS[1] pair hash, KEYS[2] circuit hash.
# ARGV: now, op (success|model|account), threshold, window_s (the cooldown if this trips),
#       reason, retention_s, trial_pair ('1'|'0'), trial_circuit ('1'|'0').
# Returns {{which (1 pair, 2 circuit), change, until, trips, reason}, ...}.
RECORD_LUA = (
    _LOAD_LUA
    + """
local trial_of = {ARGV[7] == '1', ARGV[8] == '1'}
if ARGV[2] == 'success' then
  local out = {}
  for i = 1, 2 do
    local streak, trips, till, reason, trial = load(KEYS[i])
    if till > now and not (trial and trial_of[i]) then
      -- an active cooldown outlives a success from a request admitted before it tripped
      if streak > 0 then
        redis.call('HSET', KEYS[i], 'streak', 0)
      end
    else
      if trips > 0 then
        out[#out + 1] = {tostring(i), 'recovered', num(till), tostring(trips), reason}
      end
      redis.call('DEL', KEYS[i])
    end
  end
  return out
end

local which = (ARGV[2] == 'model') and 1 or 2
local key = KEYS[which]
local threshold, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local reason, retention = ARGV[5], tonumber(ARGV[6])
local streak, trips, till, _, trial = load(key)
if till > now and not (trial and trial_of[which]) then
  return {}
end
if trips == 0 and streak + 1 < threshold then
  redis.call('HSET', key, 'streak', streak + 1, 'trips', 0, 'until', 0, 'reason', '',
             'trial', '0')
  keep(key, till, retention)
  return {}
end
trips = trips + 1
till = now + window
redis.call('HSET', key, 'streak', 0, 'trips', trips, 'until', num(till), 'reason', reason,
           'trial', '0')
keep(key, till, retention)
return {{tostring(which), 'tripped', num(till), tostring(trips), reason}}
"""
)

# KEYS[1] circuit hash, KEYS[2] pair hash. ARGV: now, window_s, retention_s.
# Returns {'blocked', which (1 circuit, 2 pair), until, reason, trips} or
#         {'admitted', trial_circuit ('1'|'0'), trial_pair ('1'|'0')}.
ADMIT_LUA = (
    _LOAD_LUA
    + """
local window, retention = tonumber(ARGV[2]), tonumber(ARGV[3])
local states = {}
for i = 1, 2 do
  local streak, trips, till, reason = load(KEYS[i])
  if till > now then
    return {'blocked', tostring(i), num(till), reason, tostring(trips)}
  end
  states[i] = trips
end
local out = {'admitted', '0', '0'}
for i = 1, 2 do
  if states[i] > 0 then
    local till = now + window
    redis.call('HSET', KEYS[i], 'until', num(till), 'trial', '1')
    keep(KEYS[i], till, retention)
    out[i + 1] = '1'
  end
end
return out
"""
)

_FIELDS = ("streak", "trips", "until", "reason", "forget", "trial")


class RedisHealthStore:
    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        policy: HealthPolicy,
        *,
        owns_client: bool = False,
        rng: Callable[[], float] = _SYSTEM_RANDOM.random,
    ) -> None:
        """`rng`: uniform in [0, 1), scaled by `policy.jitter` for each window drawn."""
        self._rng = rng
        self._client = client
        self._prefix = prefix
        self._policy = policy
        self._owns_client = owns_client
        self._record = client.register_script(RECORD_LUA)
        self._admit = client.register_script(ADMIT_LUA)

    def pair_key(self, account_id: str, model: str) -> str:
        return keys.pair_key(self._prefix, account_id, model)

    def circuit_key(self, account_id: str) -> str:
        return keys.circuit_key(self._prefix, account_id)

    async def _read(self, names: Sequence[str]) -> list[list[Any]]:
        """HMGET of every hash, pipelined: one round trip on one Redis; on a cluster, one per
        node holding any of them (sent in parallel). Each read is atomic per key; the set is
        not, which a snapshot does not need: any interleaving equals some moment's reads."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hmget(name, _FIELDS)
                rows: list[list[Any]] = await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return rows

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        if not pairs:
            return HealthSnapshot(circuits={}, cooling={})
        accounts = list(dict.fromkeys(account_id for account_id, _ in pairs))
        names = [self.circuit_key(a) for a in accounts] + [self.pair_key(a, m) for a, m in pairs]
        rows = await self._read(names)
        states = [_parse_state(row, now) for row in rows]
        circuits: dict[str, Cooldown] = {}
        for account_id, state in zip(accounts, states[: len(accounts)], strict=True):
            if found := active_cooldown(account_id, None, state, now):
                circuits[account_id] = found
        cooling: dict[tuple[str, str], Cooldown] = {}
        for (account_id, model), state in zip(pairs, states[len(accounts) :], strict=True):
            if found := active_cooldown(account_id, model, state, now):
                cooling[(account_id, model)] = found
        return HealthSnapshot(circuits=circuits, cooling=cooling)

    async def admit(self, account_id: str, served_model: str, now: float) -> Admitted | Cooldown:
        try:
            answer = await self._admit(
                keys=[self.circuit_key(account_id), self.pair_key(account_id, served_model)],
                args=[repr(now), repr(self._window(None)), repr(self._policy.retention_s)],
            )
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        row = _texts(answer)
        if row[0] == "blocked":
            _, which, until, reason, trips = row
            model = None if which == "1" else served_model
            return Cooldown(account_id, model, float(until), reason, int(trips))
        return Admitted(trial_pair=row[2] == "1", trial_circuit=row[1] == "1")

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
        policy = self._policy
        if classification.resets_streak:
            op, threshold = "success", 0
        elif classification.health_scope == "model":
            op, threshold = "model", policy.failure_threshold
        elif classification.health_scope == "account":
            op, threshold = "account", policy.account_failure_threshold
        else:
            return []
        if retry_after_s is not None and not retry_after_s > 0:  # also drops NaN
            retry_after_s = None
        trial = trial or Admitted()
        try:
            rows = await self._record(
                keys=[self.pair_key(account_id, served_model), self.circuit_key(account_id)],
                args=[
                    repr(now),
                    op,
                    threshold,
                    repr(self._window(retry_after_s, overloaded=classification.overloaded)),
                    classification.reason or classification.outcome,
                    repr(policy.retention_s),
                    "1" if trial.trial_pair else "0",
                    "1" if trial.trial_circuit else "0",
                ],
            )
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        transitions = []
        for which, change, until, trips, reason in (_texts(row) for row in rows):
            model = served_model if which == "1" else None
            state = HealthState(trips=int(trips), until=float(until), reason=reason)
            transitions.append(transition(_change(change), account_id, model, state))
        return transitions

    async def state_of(self, account_id: str, model: str | None, now: float) -> HealthState:
        """The raw machine state (None: the circuit), for diagnostics and tests."""
        key = self.circuit_key(account_id) if model is None else self.pair_key(account_id, model)
        rows = await self._read([key])
        return _parse_state(rows[0], now)

    def _window(self, retry_after_s: float | None, *, overloaded: bool = False) -> float:
        return drawn_cooldown_s(self._policy, retry_after_s, self._rng, overloaded=overloaded)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _texts(row: Sequence[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in row]


def _parse_state(row: Sequence[Any], now: float) -> HealthState:
    streak, trips, until, reason, forget, trial = (
        None if v is None else (v.decode() if isinstance(v, bytes) else str(v)) for v in row
    )
    if forget is None or float(forget) <= now:
        return HEALTHY
    return HealthState(
        streak=int(streak or 0),
        trips=int(trips or 0),
        until=float(until or 0.0),
        reason=reason or "",
        trial=trial == "1",
    )


def _change(raw: str) -> Change:
    if raw == "tripped":
        return "tripped"
    if raw == "recovered":
        return "recovered"
    raise ValueError(f"unknown health change {raw!r} from the record script")
