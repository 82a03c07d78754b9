"""Spend totals in Redis: one hash per total (`leasegate.kv.keys.chain_spend_key`: one hash
slot, so a Redis Cluster serves it too). Fields: `cutoff` (epoch seconds; absent = the total
is unknown), `tokens` and `cost` (billionths), and per second of a counted request's start
`t:<second>` and `c:<second>` (an unknown total has only these). Each operation is one Lua
script running the rules of `leasegate.spend.totals.RunningTotal`, so every replica's adds and
rebases are atomic and each request is counted once (tests/contract/test_spend_store.py holds
both stores to them)."""

from __future__ import annotations

import math

from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient

# ARGV: tokens, cost, at, second of at, ttl_s. A row before the cut-off is not counted here
# (the evidence counts it); an unknown total keeps the request in its bucket only.
_ADD = """
local key = KEYS[1]
local cutoff = redis.call('HGET', key, 'cutoff')
if cutoff and tonumber(ARGV[3]) < tonumber(cutoff) then
  return 0
end
redis.call('HINCRBY', key, 't:' .. ARGV[4], ARGV[1])
redis.call('HINCRBY', key, 'c:' .. ARGV[4], ARGV[2])
redis.call('EXPIRE', key, ARGV[5], 'GT')
redis.call('EXPIRE', key, ARGV[5], 'NX')
if not cutoff then
  return 0
end
redis.call('HINCRBY', key, 'tokens', ARGV[1])
redis.call('HINCRBY', key, 'cost', ARGV[2])
return 1
"""

# ARGV: cutoff, base tokens, base cost, ttl_s, only_if_unknown (1/0). Returns {tokens, cost}.
_REBASE = """
local key = KEYS[1]
local current = redis.call('HGET', key, 'cutoff')
local cutoff = tonumber(ARGV[1])
if current and (ARGV[5] == '1' or cutoff < tonumber(current)) then
  return {redis.call('HGET', key, 'tokens') or '0', redis.call('HGET', key, 'cost') or '0'}
end
local tokens = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local name = fields[i]
  local kind = string.sub(name, 1, 2)
  if kind == 't:' or kind == 'c:' then
    if tonumber(string.sub(name, 3)) < cutoff then
      redis.call('HDEL', key, name)
    elseif kind == 't:' then
      tokens = tokens + tonumber(fields[i + 1])
    else
      cost = cost + tonumber(fields[i + 1])
    end
  end
end
local t = string.format('%.0f', tokens)
local c = string.format('%.0f', cost)
redis.call('HSET', key, 'cutoff', ARGV[1], 'tokens', t, 'cost', c)
redis.call('EXPIRE', key, ARGV[4], 'GT')
redis.call('EXPIRE', key, ARGV[4], 'NX')
return {t, c}
"""


class RedisChainSpend:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._add = client.register_script(_ADD)
        self._rebase = client.register_script(_REBASE)

    def _key(self, total_id: str) -> str:
        return keys.chain_spend_key(self._prefix, total_id)

    async def spent(self, total_id: str) -> tuple[int, int] | None:
        try:
            cutoff, tokens, cost = await self._client.hmget(
                self._key(total_id), ["cutoff", "tokens", "cost"]
            )
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        if cutoff is None:
            return None
        return int(tokens or 0), int(cost or 0)

    async def kept(self, total_id: str) -> bool:
        try:
            return bool(await self._client.exists(self._key(total_id)))
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def add(
        self, total_id: str, tokens: int, cost_billionths: int, at: float, keep_s: float
    ) -> None:
        args = (tokens, cost_billionths, repr(at), math.floor(at), _ttl(keep_s))
        try:
            await self._add(keys=[self._key(total_id)], args=args)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def rebase(
        self,
        total_id: str,
        cutoff: float,
        tokens: int,
        cost_billionths: int,
        keep_s: float,
        *,
        only_if_unknown: bool,
    ) -> tuple[int, int]:
        args = (repr(cutoff), tokens, cost_billionths, _ttl(keep_s), int(only_if_unknown))
        try:
            held_tokens, held_cost = await self._rebase(keys=[self._key(total_id)], args=args)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return int(held_tokens), int(held_cost)


def _ttl(keep_s: float) -> int:
    return max(1, math.ceil(keep_s))
