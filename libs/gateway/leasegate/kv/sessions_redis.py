"""The console's open sessions in Redis, shared by every control-plane replica: one sorted set
(`leasegate.kv.keys.console_sessions_key`), member `<credential>.<session id>`, score the
session's expiry (epoch seconds). One key, so every command touches one hash slot and a Redis
Cluster serves it as is. Checking a session is one `ZSCORE`; opening one is one script (add,
drop the expired, keep the key until the last session's expiry), so the set never outgrows
the sessions opened within one session lifetime. Credentials and session ids are base64url,
which has no `.`."""

from __future__ import annotations

import math
from collections.abc import Collection

from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient

# KEYS[1] the set; ARGV: member, expiry, now
_OPEN = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', math.ceil(tonumber(last[2]) * 1000)))
return 1
"""


def _member(credential: str, session_id: str) -> str:
    return f"{credential}.{session_id}"


class RedisConsoleSessions:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self.key = keys.console_sessions_key(prefix)
        self._open = client.register_script(_OPEN)

    async def open(self, credential: str, session_id: str, expires_at: float, now: float) -> None:
        member = _member(credential, session_id)
        try:
            await self._open(keys=[self.key], args=[member, repr(expires_at), repr(now)])
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def is_open(self, credential: str, session_id: str, now: float) -> bool:
        try:
            until = await self._client.zscore(self.key, _member(credential, session_id))
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return until is not None and float(until) > now

    async def close(self, credential: str, session_id: str) -> None:
        try:
            await self._client.zrem(self.key, _member(credential, session_id))
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def retire(self, keep: Collection[str], now: float) -> int:
        try:
            members = await self._client.zrangebyscore(self.key, f"({now!r}", math.inf)
            gone = [
                text
                for member in members
                if (text := member.decode() if isinstance(member, bytes) else str(member)).split(
                    ".", 1
                )[0]
                not in keep
            ]
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.zremrangebyscore(self.key, "-inf", repr(now))
                if gone:
                    pipe.zrem(self.key, *gone)
                await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return len(gone)
