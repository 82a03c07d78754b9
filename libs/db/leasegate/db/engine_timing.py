"""Timing SQLAlchemy's statements for the store metrics: one call per statement, from the
engine's events, timed around the driver's execute (pool wait excluded). The asyncpg pool
times its own calls (`leasegate.pg.pool`); `Database.observe` hooks both."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from leasegate.core.ports.calls import CallObserver

_STARTED = "leasegate_started"


def observe_engine(engine: AsyncEngine, calls: CallObserver) -> None:
    """Tell `calls` of every statement `engine` executes from now on."""

    def before(conn: Any, *_: Any) -> None:
        conn.info.setdefault(_STARTED, []).append(time.perf_counter())

    def after(conn: Any, *_: Any) -> None:
        started = conn.info.get(_STARTED)
        if started:
            calls.succeeded(time.perf_counter() - started.pop())

    def failed(context: Any) -> None:
        calls.failed()
        conn = context.connection
        if conn is not None and conn.info.get(_STARTED):
            conn.info[_STARTED].pop()

    sync_engine = engine.sync_engine
    event.listen(sync_engine, "before_cursor_execute", before)
    event.listen(sync_engine, "after_cursor_execute", after)
    event.listen(sync_engine, "handle_error", failed)
