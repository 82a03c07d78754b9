"""One async engine per process, tuned per database.

Postgres (production): every call has a deadline (`Deadlines`): opening a connection is
bounded by `connect_s`, each statement by `command_s` (asyncpg's `timeout` and
`command_timeout`). A partitioned database therefore fails a call within a few
seconds (`StoreUnavailable`, answered 503 `unavailable`) instead of holding it for the partition's
length. A pooled connection the server closed (a restart, a failover) is never lent again: the
check is asyncpg's closed flag, not a ping, so it costs no round trip (`_skip_closed_connections`).

SQLite (the embedded mode): WAL so readers never block on the writer, foreign keys on, and every
transaction begins with `BEGIN IMMEDIATE`, taking the write lock up front. Deferred
transactions that read and then write deadlock under concurrency (neither can upgrade its
lock); immediate ones simply queue on the busy timeout. That queue is also what serialises the
lease-capacity check on SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, Pool, StaticPool

from leasegate.core.ports.calls import CallObserver
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.db.engine_errors import ENGINE_ERRORS, Refusal, disconnected, translated
from leasegate.db.engine_timing import observe_engine
from leasegate.pg.pool import PG_POOL_SIZE, PING_TIMEOUT_S, Deadlines, PgPool
from leasegate.pg.url import connect_kwargs

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 30_000
POOL_WAIT_S = 30.0
"""A burst (hundreds of mints queued on one account's row lock) waits this long for a pooled
connection; every holder is itself bounded by the deadlines, so a partition frees them."""


def make_engine(
    url: str, *, poolclass: type[Pool] | None = None, deadlines: Deadlines | None = None
) -> AsyncEngine:
    """An engine for `url` (`sqlite+aiosqlite://` or `postgresql+asyncpg://`)."""
    parsed = make_url(url)
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        in_memory = parsed.database in (None, "", ":memory:")
        if poolclass is not None:
            options["poolclass"] = poolclass
        elif in_memory:
            # every connection to :memory: is a new database; share the one
            options["poolclass"] = StaticPool
        else:
            options.update(pool_size=5, max_overflow=5)
        engine = create_async_engine(url, **options)
        _tune_sqlite(engine, wal=not in_memory)
        return engine
    # Without explicit deadlines (migrations, tools) a connection attempt is still bounded,
    # but a statement may take as long as it needs: a migration must never be cut short.
    limits = deadlines or Deadlines(command_s=None)
    connect_args: dict[str, float] = {"timeout": limits.connect_s}
    if limits.command_s is not None:
        connect_args["command_timeout"] = limits.command_s
    options["connect_args"] = connect_args
    if poolclass is not None:
        options["poolclass"] = poolclass
    else:
        # No pre-ping: it cost a round trip on every checkout (a third of a mint's CPU). A
        # connection the server closed is skipped at checkout for free instead (below); one
        # that dies during its call fails that call (503 `unavailable`), SQLAlchemy then
        # invalidates the whole pool and the next call reconnects. The hot paths have their
        # own asyncpg pool (`Database.pg`); this one
        # serves the other reads and the audit chain's writes: small, so a process's
        # connections stay within `pool size + 10` of the server's limit.
        options.update(pool_size=5, max_overflow=5, pool_timeout=POOL_WAIT_S, pool_recycle=1800)
    engine = create_async_engine(url, **options)
    _skip_closed_connections(engine)
    return engine


def _skip_closed_connections(engine: AsyncEngine) -> None:
    """Never lend a pooled connection the server already closed (a restart, a failover,
    `pg_terminate_backend`): asyncpg marks it closed as soon as this loop sees the socket
    end, so the check is a flag, not a round trip. SQLAlchemy answers `DisconnectionError`
    from a checkout by discarding the connection and checking out another (or a new one)."""

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(_dbapi: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        driver = record.driver_connection
        if driver is not None and driver.is_closed():
            raise DisconnectionError("the server closed this pooled connection")


def _tune_sqlite(engine: AsyncEngine, *, wal: bool) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # stop the driver issuing its own deferred BEGIN; the "begin" hook below does it
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if wal:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class Database:
    """The engine and its sessions. Each `session()` is one transaction (a unit of work).

    On Postgres, `pg` also lends plain asyncpg connections (`leasegate.pg.pool`) to the
    hot paths that need no unit of work: mint, renewal, revocation, key and decision reads,
    evidence batches."""

    def __init__(
        self,
        engine: AsyncEngine,
        deadlines: Deadlines | None = None,
        pool_size: int = PG_POOL_SIZE,
    ) -> None:
        self.engine = engine
        self.dialect: str = engine.dialect.name
        """`sqlite` or `postgresql`."""
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._deadlines = deadlines or Deadlines(command_s=None)
        self._pg: PgPool | None = None
        self._pool_size = pool_size
        self._pg_calls: CallObserver | None = None

    @classmethod
    def connect(
        cls, url: str, deadlines: Deadlines | None = None, pool_size: int = PG_POOL_SIZE
    ) -> Database:
        return cls(make_engine(url, deadlines=deadlines), deadlines, pool_size)

    @property
    def pg(self) -> PgPool:
        """The asyncpg pool (Postgres only), made on first use."""
        if self._pg is None:
            if self.dialect != "postgresql":
                raise RuntimeError("the asyncpg pool exists on Postgres only")
            self._pg = PgPool(
                connect_kwargs(self.engine.url.render_as_string(hide_password=False)),
                size=self._pool_size,
                connect_s=self._deadlines.connect_s,
                command_s=self._deadlines.command_s,
                calls=self._pg_calls,
            )
        return self._pg

    def observe(self, calls: CallObserver) -> None:
        """Time every call from now on: the engine's statements and the asyncpg pool's
        connections (`leasegate.db.engine_timing`, `leasegate.pg.pool`)."""
        observe_engine(self.engine, calls)
        self._pg_calls = calls
        if self._pg is not None:
            self._pg.calls = calls

    @asynccontextmanager
    async def session(self, refusal: Refusal | None = None) -> AsyncIterator[AsyncSession]:
        """One transaction: committed when the block ends, rolled back if it raises. A driver
        error leaves the block as `refusal`'s answer or a `StoreError` (`leasegate.pg.errors`)."""
        try:
            async with self._sessions.begin() as session:
                yield session
        except ENGINE_ERRORS as exc:
            raise translated(exc, refusal) from exc

    @asynccontextmanager
    async def connection(self, refusal: Refusal | None = None) -> AsyncIterator[AsyncConnection]:
        """A pooled connection, no transaction begun; driver errors translated as `session`'s."""
        try:
            async with self.engine.connect() as connection:
                yield connection
        except ENGINE_ERRORS as exc:
            raise translated(exc, refusal) from exc

    async def read(self, call: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """`call` (statements that change nothing) on a pooled connection, in a transaction
        (REPEATABLE READ on Postgres: one snapshot for all its statements); run once more on a
        fresh connection if the first turned out lost (`engine_errors.disconnected`): a read
        changes nothing, so a second run is harmless. Not after a deadline or a refused
        connection, which a second try would only repeat."""
        try:
            return await self._read_once(call)
        except StoreUnavailable as exc:
            if not disconnected(exc.__cause__):
                raise
        return await self._read_once(call)

    async def _read_once(self, call: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        async with self.connection() as connection:
            if self.dialect == "postgresql":
                await connection.execution_options(isolation_level="REPEATABLE READ")
            async with connection.begin():
                return await call(connection)

    async def ping(self) -> bool:
        """Whether the database answers a trivial query within a couple of seconds."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                for attempt in (1, 2):
                    try:
                        async with self.engine.connect() as connection:
                            await connection.execute(text("SELECT 1"))
                    except ENGINE_ERRORS as exc:  # TimeoutError included: it is an OSError
                        # a pooled connection found lost is not the database unreachable
                        if attempt == 2 or not disconnected(exc):
                            return False
                    else:
                        return True
        except TimeoutError:
            pass
        return False

    async def schema_revisions(self) -> frozenset[str]:
        """The revisions in `alembic_version`; none when the table does not exist. Raises
        StoreError when the database cannot be reached."""
        async with self.connection() as connection:
            if not await connection.run_sync(_has_version_table):
                return frozenset()
            rows = await connection.execute(text("SELECT version_num FROM alembic_version"))
        return frozenset(str(row[0]) for row in rows)

    async def dispose(self) -> None:
        if self._pg is not None:
            await self._pg.close()
        await self.engine.dispose()


def _has_version_table(connection: Connection) -> bool:
    return inspect(connection).has_table("alembic_version")
