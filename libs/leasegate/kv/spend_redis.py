"""Chain spend in Redis: one hash per chain (`leasegate.kv.keys.chain_spend_key`: one hash
slot, so a Redis Cluster serves it too), fields `tokens` and `cost` (billionths), added with
HINCRBY in one MULTI so every replica's increments count exactly once."""

from __future__ import annotations

import math

from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient


class RedisChainSpend:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    def _key(self, chain_id: str) -> str:
        return keys.chain_spend_key(self._prefix, chain_id)

    async def spent(self, chain_id: str) -> tuple[int, int]:
        try:
            tokens, cost = await self._client.hmget(self._key(chain_id), ["tokens", "cost"])
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        return int(tokens or 0), int(cost or 0)

    async def add(self, chain_id: str, tokens: int, cost_billionths: int, keep_s: float) -> None:
        key = self._key(chain_id)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hincrby(key, "tokens", tokens)
                pipe.hincrby(key, "cost", cost_billionths)
                pipe.expire(key, max(1, math.ceil(keep_s)), gt=True)
                pipe.expire(key, max(1, math.ceil(keep_s)), nx=True)
                await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
