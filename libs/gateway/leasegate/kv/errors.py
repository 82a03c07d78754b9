"""redis-py's exceptions, translated into the core's `StoreUnavailable` in one place.

Every Redis store method awaits its call inside

    try:
        ...
    except REDIS_ERRORS as exc:
        raise unavailable(exc) from exc

which costs nothing while the call succeeds (no wrapper object, no extra await: these calls
are on the proxy's per-request path). Nothing above this package sees a redis exception.

Every Redis failure is `StoreUnavailable`: a refused or reset connection, a deadline, a
cluster failing over (`CLUSTERDOWN`, `TRYAGAIN`, no reachable node, which redis-py raises as
`RedisClusterException`, not a `RedisError`), a replica that is read-only, and a key of the
wrong type. None of them is about the content of a call the stores make.
"""

from __future__ import annotations

from redis.exceptions import RedisClusterException, RedisError

from leasegate.core.ports.errors import StoreUnavailable

REDIS_ERRORS: tuple[type[Exception], ...] = (
    RedisError,
    RedisClusterException,
    OSError,
    AttributeError,
    TypeError,
)
"""What a Redis call may raise when Redis, not the code, is at fault (OSError: a socket gone
underneath the client; TimeoutError is one). AttributeError and TypeError: redis-py 8.1's
asyncio connection lets a writer closed under it (a peer reset, or a connect timed out while
another task writes: seen with 200 racing first calls on a fresh cluster client) escape as
`'NoneType' object has no attribute 'writelines'` instead of a ConnectionError (redis-py
issues 3546 and 4287). Only a Redis call sits inside each `try`, so nothing of ours is hidden."""


def unavailable(exc: BaseException) -> StoreUnavailable:
    """The core's error for one of `REDIS_ERRORS`; its reason is the driver's error class."""
    return StoreUnavailable(type(exc).__name__)
