"""Request slots shared by every proxy process: one sorted set per account in Redis.

`{prefix}:{acct:<account>}:slots` holds request ids scored by lease expiry (epoch seconds);
every script and command touches that one key, so one slot of a cluster. A member
is live while its score is after `now`, the rule of leasegate.capacity.table. Admission is one
Lua script, so the check and the take are one atomic step however many processes race; release
is a ZREM, which removes a member once, so only one caller ever sees it succeed.

The key's TTL is pushed to `lease_s` on every write: no member outlives its last write by more
than that, so an account whose processes all died leaves nothing behind in Redis either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient

# ARGV: holder, capacity, now, expiry, ttl_ms. Expired members go first, so a dead process's
# slots stop counting at the exact moment their lease runs out.
_ACQUIRE = """
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[3])
if not redis.call('ZSCORE', key, ARGV[1]) then
  if redis.call('ZCARD', key) >= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('ZADD', key, ARGV[4], ARGV[1])
redis.call('PEXPIRE', key, ARGV[5])
return 1
"""

# ARGV: now, expiry, ttl_ms, holder... Dropping the expired first makes XX skip them, so a
# late renewal cannot revive a slot that already stopped counting.
_RENEW = """
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
for i = 4, #ARGV do
  redis.call('ZADD', key, 'XX', ARGV[2], ARGV[i])
end
if redis.call('EXISTS', key) == 1 then
  redis.call('PEXPIRE', key, ARGV[3])
end
return 0
"""


class RedisRequestSlots:
    """Request slots in Redis. The client is borrowed: `aclose` closes it only if `owns_client`."""

    def __init__(
        self, client: RedisClient, prefix: str, lease_s: float, *, owns_client: bool = False
    ) -> None:
        if lease_s <= 0:
            raise ValueError("lease_s must be positive")
        self._client = client
        self._prefix = prefix
        self._lease_s = lease_s
        self._ttl_ms = math.ceil(lease_s * 1000)
        self._owns_client = owns_client
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)

    @property
    def lease_s(self) -> float:
        return self._lease_s

    def key(self, account_id: str) -> str:
        return keys.slots_key(self._prefix, account_id)

    async def acquire(self, account_id: str, holder: str, capacity: int, now: float) -> bool:
        args = (holder, capacity, repr(now), repr(now + self._lease_s), self._ttl_ms)
        try:
            taken = await self._acquire(keys=[self.key(account_id)], args=args)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return bool(taken)

    async def release(self, account_id: str, holders: Sequence[str]) -> int:
        if not holders:
            return 0
        try:
            removed = await self._client.zrem(self.key(account_id), *holders)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return int(removed)

    async def renew(self, account_id: str, holders: Sequence[str], now: float) -> None:
        if not holders:
            return
        args: list[str | int] = [repr(now), repr(now + self._lease_s), self._ttl_ms, *holders]
        try:
            await self._renew(keys=[self.key(account_id)], args=args)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def in_flight(self, account_ids: Sequence[str], now: float) -> dict[str, int]:
        if not account_ids:
            return {}
        after_now = f"({now!r}"
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for account_id in account_ids:
                    pipe.zcount(self.key(account_id), after_now, "+inf")
                counts = await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return dict(zip(account_ids, map(int, counts), strict=True))

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
