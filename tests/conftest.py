from tests.fixtures.services import fresh_pg_database, redis_prefix, redis_url

__all__ = ["fresh_pg_database", "redis_prefix", "redis_url"]
