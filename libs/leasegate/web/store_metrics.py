"""Database call latency and errors as Prometheus metrics, from SQLAlchemy's engine events.

One histogram observation per statement, timed around the driver's execute: the cost of the
call as the process sees it (pool wait excluded). Redis calls are not timed: redis-py offers no
hook that is as cheap, and the proxy's hot path makes at most one or two of them per request.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from sqlalchemy import event

from leasegate.db import Database

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
