from tests.fixtures.redis_cluster import redis_cluster_url
from tests.fixtures.services import (
    fresh_pg_database,
    migrated_pg_database,
    redis_prefix,
    redis_url,
)
from tests.fixtures.storage import migrated_url, store

__all__ = [
    "fresh_pg_database",
    "migrated_pg_database",
    "migrated_url",
    "redis_cluster_url",
    "redis_prefix",
    "redis_url",
    "store",
]
