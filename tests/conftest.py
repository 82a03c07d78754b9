from tests.fixtures.redis_cluster import redis_cluster_url
from tests.fixtures.services import (
    fresh_pg_database,
    migrated_pg_database,
    mode,
    redis_prefix,
    redis_url,
    stores_env,
)
from tests.fixtures.storage import migrated_url, store

__all__ = [
    "fresh_pg_database",
    "migrated_pg_database",
    "migrated_url",
    "mode",
    "redis_cluster_url",
    "redis_prefix",
    "redis_url",
    "store",
    "stores_env",
]
