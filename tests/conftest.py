import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `serial` test must be `slow` too (it starts processes), so `-m 'not slow'` never runs
    it. Files holding a `slow` test are collected first, each file still whole: with
    `--dist loadfile --no-loadscope-reorder` (`make test`) the long files start at once and
    the many quick files fill both workers' tails, instead of one worker ending on a long one."""
    unmarked = [
        i.nodeid
        for i in items
        if i.get_closest_marker("serial") and not i.get_closest_marker("slow")
    ]
    if unmarked:
        raise pytest.UsageError(f"marked serial but not slow: {', '.join(unmarked)}")
    slow_files = {i.path for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: i.path not in slow_files)
