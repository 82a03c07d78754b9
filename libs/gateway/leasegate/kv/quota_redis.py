"""Learned quotas in Redis, beside the health hashes and hash-tagged by account.

One hash per (account, served model), `{prefix}:{acct:<id>}:quota:<model>`:

    src        headers | declared
    at         epoch seconds the quota was observed (%.17g)
    requests   "limit,remaining,reset_at,window_s", each empty when unknown
    tokens, input-tokens, output-tokens   the same, for the dimensions the provider limits

`learn` writes every quota of a batch in one pipeline (replacing the hash whole, with a TTL of
`RETENTION_S` past its latest reset); `snapshot` reads every pair in one pipeline of
HGETALLs: one round trip on a single Redis, one per node on a cluster. The last writer wins:
proxies write what their answers said within a flush interval of each other, and a quota is
a statement about a bucket that refills anyway, so no ordering script is worth its cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from leasegate.core.ports.quota import DIMENSIONS, Bucket, Quota, QuotaDimension
from leasegate.kv import keys
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.quota_memory import RETENTION_S
from leasegate.kv.redis_client import RedisClient


class RedisQuotaStore:
    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    def key(self, account_id: str, model: str) -> str:
        return keys.quota_key(self._prefix, account_id, model)

    async def snapshot(
        self, pairs: Sequence[tuple[str, str]], now: float
    ) -> Mapping[tuple[str, str], Quota]:
        if not pairs:
            return {}
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for account_id, model in pairs:
                    pipe.hgetall(self.key(account_id, model))
                rows: list[dict[Any, Any]] = await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc
        found: dict[tuple[str, str], Quota] = {}
        for (account_id, model), row in zip(pairs, rows, strict=True):
            quota = parse_quota(account_id, model, row)
            if quota is not None and quota.expires_at() + RETENTION_S > now:
                found[(account_id, model)] = quota
        return found

    async def learn(self, quotas: Sequence[Quota], now: float) -> None:
        if not quotas:
            return
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for quota in quotas:
                    name = self.key(quota.account_id, quota.model)
                    pipe.delete(name)
                    pipe.hset(name, mapping=quota_fields(quota))
                    ttl = max(1, math.ceil(max(quota.expires_at(), now) - now + RETENTION_S))
                    pipe.expire(name, ttl)
                await pipe.execute()
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def aclose(self) -> None:
        return None  # the client belongs to the wiring


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.17g}"


def quota_fields(quota: Quota) -> dict[Any, Any]:
    fields: dict[Any, Any] = {"src": quota.source, "at": _number(quota.observed_at)}
    for dimension, bucket in quota.buckets.items():
        fields[dimension] = ",".join(
            (
                _number(bucket.limit),
                _number(bucket.remaining),
                _number(bucket.reset_at),
                _number(bucket.window_s),
            )
        )
    return fields


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_quota(account_id: str, model: str, row: Mapping[Any, Any]) -> Quota | None:
    """A stored hash as a Quota; None when empty or unreadable (treated as never learned)."""
    if not row:
        return None
    fields = {_text(k): _text(v) for k, v in row.items()}
    source = fields.get("src")
    try:
        observed_at = float(fields.get("at", ""))
        buckets: dict[QuotaDimension, Bucket] = {}
        for dimension in DIMENSIONS:
            if (raw := fields.get(dimension)) is None:
                continue
            limit, remaining, reset_at, window = (p or None for p in raw.split(","))
            buckets[dimension] = Bucket(
                None if limit is None else int(float(limit)),
                None if remaining is None else int(float(remaining)),
                None if reset_at is None else float(reset_at),
                None if window is None else float(window),
            )
    except ValueError:
        return None
    if source == "headers":
        return Quota(account_id, model, buckets, "headers", observed_at)
    if source == "declared":
        return Quota(account_id, model, buckets, "declared", observed_at)
    return None
