"""The shared health store on Redis: every update is one Lua script, atomic across processes.

Layout, one hash per entry (fields streak, trips, until, reason, forget), both under the
account's hash tag (`leasegate.kv.keys`), so the record script touches one slot of a cluster:

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

from collections.abc import Sequence
from typing import Any

from leasegate.core.observation import Classification
from leasegate.core.ports.health import (
    Cooldown,
    HealthPolicy,
    HealthSnapshot,
    HealthTransition,
)
from leasegate.kv import keys
from leasegate.kv.redis_client import RedisClient
from leasegate.routing.health import HEALTHY, Change, HealthState, active_cooldown, transition

# KEYS[1] pair hash, KEYS[2] circuit hash.
# ARGV: op (success|model|account), now, threshold, base_s, max_s, retry_after_s ('' = none),
#       reason, retention_s.
# Returns {{which (1 pair, 2 circuit), change, until, trips, reason}, ...}.
RECORD_LUA = """
local now = tonumber(ARGV[2])
local function num(x) return string.format('%.17g', x) end
local function load(key)
  local v = redis.call('HMGET', key, 'streak', 'trips', 'until', 'reason', 'forget')
  if (tonumber(v[5]) or 0) <= now then
    return 0, 0, 0, ''
  end
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, v[4] or ''
end
local function keep(key, till, retention)
  local forget = math.max(till, now) + retention
  redis.call('HSET', key, 'forget', num(forget))
  redis.call('PEXPIRE', key, math.ceil((forget - now) * 1000))
end

if ARGV[1] == 'success' then
  local out = {}
  for i = 1, 2 do
    local streak, trips, till, reason = load(KEYS[i])
    if till > now then
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

local which = (ARGV[1] == 'model') and 1 or 2
local key = KEYS[which]
local threshold = tonumber(ARGV[3])
local base, max_s = tonumber(ARGV[4]), tonumber(ARGV[5])
local retry_after = tonumber(ARGV[6]) or 0
local reason, retention = ARGV[7], tonumber(ARGV[8])
local streak, trips, till = load(key)
if till > now then
  return {}
end
if trips == 0 and streak + 1 < threshold then
  redis.call('HSET', key, 'streak', streak + 1, 'trips', 0, 'until', 0, 'reason', '')
  keep(key, till, retention)
  return {}
end
trips = trips + 1
local backoff = base * 2 ^ math.min(trips - 1, 1000)
till = now + math.min(max_s, math.max(backoff, retry_after))
redis.call('HSET', key, 'streak', 0, 'trips', trips, 'until', num(till), 'reason', reason)
keep(key, till, retention)
return {{tostring(which), 'tripped', num(till), tostring(trips), reason}}
"""

_FIELDS = ("streak", "trips", "until", "reason", "forget")


class RedisHealthStore:
    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        policy: HealthPolicy,
        *,
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._policy = policy
        self._owns_client = owns_client
        self._record = client.register_script(RECORD_LUA)

    def pair_key(self, account_id: str, model: str) -> str:
        return keys.pair_key(self._prefix, account_id, model)

    def circuit_key(self, account_id: str) -> str:
        return keys.circuit_key(self._prefix, account_id)

    async def _read(self, names: Sequence[str]) -> list[list[Any]]:
        """HMGET of every hash, pipelined: one round trip on one Redis; on a cluster, one per
        node holding any of them (sent in parallel). Each read is atomic per key; the set is
        not, which a snapshot does not need: any interleaving equals some moment's reads."""
        async with self._client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hmget(name, _FIELDS)
            rows: list[list[Any]] = await pipe.execute()
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

    async def record(
        self,
        account_id: str,
        served_model: str,
        classification: Classification,
        retry_after_s: float | None,
        now: float,
    ) -> list[HealthTransition]:
        policy = self._policy
        if classification.resets_streak:
            op, threshold = "success", 0
        elif classification.scope == "model":
            op, threshold = "model", policy.failure_threshold
        elif classification.scope == "account":
            op, threshold = "account", policy.account_failure_threshold
        else:
            return []
        retry_after = ""
        if retry_after_s is not None and retry_after_s > 0:  # also drops NaN
            # capping here changes nothing (the script caps too) but keeps `inf` off the wire
            retry_after = repr(min(retry_after_s, policy.max_cooldown_s))
        rows = await self._record(
            keys=[self.pair_key(account_id, served_model), self.circuit_key(account_id)],
            args=[
                op,
                repr(now),
                threshold,
                repr(policy.base_cooldown_s),
                repr(policy.max_cooldown_s),
                retry_after,
                classification.reason or classification.outcome,
                repr(policy.retention_s),
            ],
        )
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

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _texts(row: Sequence[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in row]


def _parse_state(row: Sequence[Any], now: float) -> HealthState:
    streak, trips, until, reason, forget = (
        None if v is None else (v.decode() if isinstance(v, bytes) else str(v)) for v in row
    )
    if forget is None or float(forget) <= now:
        return HEALTHY
    return HealthState(
        streak=int(streak or 0),
        trips=int(trips or 0),
        until=float(until or 0.0),
        reason=reason or "",
    )


def _change(raw: str) -> Change:
    if raw == "tripped":
        return "tripped"
    if raw == "recovered":
        return "recovered"
    raise ValueError(f"unknown health change {raw!r} from the record script")
