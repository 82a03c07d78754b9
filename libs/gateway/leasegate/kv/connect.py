"""The one Redis client of a process: every call has a deadline, and a connection that died
with a Redis restart is noticed before it fails a request.

- `connect_s` bounds opening a connection, `command_s` each reply (a wait for a pooled
  connection, rare with 512 of them, is bounded by `POOL_WAIT_S`). A partitioned Redis fails
  a call within them (`redis.exceptions.TimeoutError`), which the services answer 503
  `unavailable`; the connection is then dropped, never reused.
- A command that meets a dead pooled connection (`ConnectionError`: Redis restarted, the
  socket was reset) is sent once more on a fresh connection. Timeouts are not retried, so a
  partition costs one deadline, not several.
- A connection idle for `HEALTH_CHECK_INTERVAL_S` is pinged before it is used.

The resend is safe for the slot scripts (holder-keyed: taking or returning a slot twice is
taking or returning it once). A health update could count twice only if the connection were
cut after Redis ran the script and before its reply: a stale pooled connection fails on
sending, before Redis sees anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from leasegate.kv.redis_timed import TimedRedis

HEALTH_CHECK_INTERVAL_S = 5
MAX_CONNECTIONS = 512
POOL_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Redis call deadlines; the defaults are those of `LEASEGATE_REDIS_*_TIMEOUT_S`."""

    connect_s: float = 2.0
    command_s: float = 2.0

    def socket_options(self) -> dict[str, Any]:
        """The connection settings a single Redis's pool and a cluster's nodes both take:
        these deadlines, keepalive, and the idle connection's ping."""
        return {
            "socket_connect_timeout": self.connect_s,
            "socket_timeout": self.command_s,
            "socket_keepalive": True,
            "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        }


def redis_client(url: str, deadlines: Deadlines | None = None) -> TimedRedis:
    """A client on a blocking pool: a burst of admissions waits briefly for a connection
    rather than failing with MaxConnectionsError."""
    limits = deadlines or Deadlines()
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=POOL_WAIT_S,
        **limits.socket_options(),
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )
    return TimedRedis(connection_pool=pool)
