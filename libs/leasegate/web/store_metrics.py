"""Store call latency and errors as Prometheus metrics, labelled by store.

The database (`postgresql` or `sqlite`): one observation per statement, from SQLAlchemy's
engine events, timed around the driver's execute (pool wait excluded). Redis (`redis`, a single
server or a cluster): one per command or pipeline, timed by the client itself
(`leasegate.kv.redis_timed`, pool wait included). Embedded mode has no Redis, so no series.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from sqlalchemy import event

from leasegate.db import Database
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.redis_timed import observe
from leasegate.web.wiring import Stores

_STARTED = "leasegate_started"
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.seconds = Histogram(
            "leasegate_store_call_seconds",
            "Duration of one statement against the store.",
            ["store"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.errors = Counter(
            "leasegate_store_errors",
            "Statements against the store that raised.",
            ["store"],
            registry=registry,
        )

    def watch(self, stores: Stores) -> None:
        """Time every call of the process's stores from now on."""
        self.watch_database(stores.database)
        if stores.redis is not None:
            self.watch_redis(stores.redis)

    def watch_redis(self, client: RedisClient) -> None:
        observe(client, _Calls(self.seconds.labels("redis"), self.errors.labels("redis")))

    def watch_database(self, database: Database) -> None:
        store = database.dialect  # sqlite or postgresql
        seconds = self.seconds.labels(store)
        errors = self.errors.labels(store)

        def before(conn: Any, *_: Any) -> None:
            conn.info.setdefault(_STARTED, []).append(time.perf_counter())

        def after(conn: Any, *_: Any) -> None:
            started = conn.info.get(_STARTED)
            if started:
                seconds.observe(time.perf_counter() - started.pop())

        def failed(context: Any) -> None:
            errors.inc()
            conn = context.connection
            if conn is not None and conn.info.get(_STARTED):
                conn.info[_STARTED].pop()

        engine = database.engine.sync_engine
        event.listen(engine, "before_cursor_execute", before)
        event.listen(engine, "after_cursor_execute", after)
        event.listen(engine, "handle_error", failed)


class _Calls:
    """A store's series, as `leasegate.kv.redis_timed.CallObserver`."""

    __slots__ = ("_errors", "_seconds")

    def __init__(self, seconds: Histogram, errors: Counter) -> None:
        self._seconds = seconds
        self._errors = errors

    def succeeded(self, seconds: float) -> None:
        self._seconds.observe(seconds)

    def failed(self) -> None:
        self._errors.inc()
