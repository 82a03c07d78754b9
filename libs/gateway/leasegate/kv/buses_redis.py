"""The proxy's two Redis buses, revocations and health news, on one subscription: one
pub/sub connection and one heartbeat for both channels (subscription_redis.py)."""

from __future__ import annotations

from leasegate.kv import keys
from leasegate.kv.health_fanout_redis import RedisHealthFanout
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.revocations_redis import RedisRevocationBus
from leasegate.kv.subscription_redis import RedisSubscription


def redis_buses(
    client: RedisClient, prefix: str, *, reply_within_s: float, heartbeat_s: float
) -> tuple[RedisRevocationBus, RedisHealthFanout]:
    news = RedisSubscription(
        client,
        (keys.revocations_channel(prefix), keys.health_news_channel(prefix)),
        "news",
        "leasegate.kv",
        reply_within_s=reply_within_s,
        heartbeat_s=heartbeat_s,
    )
    revocations = RedisRevocationBus(client, prefix, subscription=news)
    return revocations, RedisHealthFanout(client, prefix, subscription=news)
