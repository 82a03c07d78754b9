"""The audit witness in Redis, shared by every control-plane replica: `{prefix}:audit:witness`,
a hash of `revision` and `head`. One Lua script moves it, and only forward, so replicas racing
to witness different revisions leave the highest one, and nothing ever lowers it."""

from __future__ import annotations

from leasegate.core.ports.witness import Witness
from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient

# ARGV: revision, head hash. Equal or lower revisions are ignored: the first writer of a
# revision wins, so a reader that saw a different head at that revision reads corrupt.
_ADVANCE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')
if tonumber(ARGV[1]) > current then
  redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'head', ARGV[2])
  return 1
end
return 0
"""


class RedisAuditWitness:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self.key = keys.witness_key(prefix)
        self._advance = client.register_script(_ADVANCE)

    async def read(self) -> Witness | None:
        try:
            revision, head = await self._client.hmget(self.key, ["revision", "head"])
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        if revision is None or head is None:
            return None
        text = head.decode() if isinstance(head, bytes) else str(head)
        return Witness(int(revision), text)

    async def advance(self, witness: Witness) -> None:
        try:
            await self._advance(keys=[self.key], args=[witness.revision, witness.head_hash])
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
