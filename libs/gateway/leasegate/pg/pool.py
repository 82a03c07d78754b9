"""asyncpg connections for the hot paths on Postgres, without SQLAlchemy in between.

A mint, a renewal, a revocation and a key read are each one statement. Through SQLAlchemy
each also paid a pool checkout and checkin through greenlets, the statement's compilation and
cache lookup, an AUTOCOMMIT switch or a BEGIN/COMMIT pair, and (for ORM reads) a unit of work
and identity map: most of the control plane's CPU per mint. `PgPool` lends plain asyncpg
connections instead; each statement runs in autocommit and asyncpg prepares it once per
connection (its statement cache), so a call is one round trip and a few microseconds of
Python.

The same deadlines as the engine's: a connection attempt is bounded by `connect_s`, each
statement by `command_s`. A failure that may have left a connection unusable (a closed or
reset socket, a timeout, a server shutting down, a cancelled call) terminates that connection
and every idle one, as SQLAlchemy invalidates its pool on a disconnect. Every driver error the
caller does not handle itself (`passthrough`) leaves as the core's `StoreError`, sorted by
`leasegate.pg.errors.store_error` (`StoreUnavailable`, answered 503 `unavailable`, or
`StoreRejected` for content the database refuses). The next call connects afresh.

Dead connections. A pooled connection the server closed while it sat idle (a restart, a
failover, `pg_terminate_backend`) is never lent: asyncpg marks it closed as soon as this loop
sees its socket end, and `connection()` skips it for a fresh one, at the cost of a flag check.
One that dies *during* a call fails that call; `read()` and `ended_by_server()` decide when the
call may run again on a fresh connection, once:

- a read changes nothing, so running it twice is harmless: `read()` retries it after a lost
  connection (the server's own termination message, a connection closed or reset). Not after
  a timeout: a partitioned database would cost two deadlines instead of one, and not when a
  connection cannot even be opened (the database is down: a second try fails alike);
- a write may retry only when it provably did not commit. asyncpg cannot say whether a
  statement reached the server before its connection died, so the only certain case is the
  server's own FATAL `admin_shutdown` / `crash_shutdown` (SQLSTATE 57P01, 57P02): the backend
  that ran the statement is exiting, so its transaction either committed before the message
  (and is visible to a fresh connection now) or never will. The other certain case is a
  statement asyncpg refused before sending it (`never_sent`: its protocol state was upset by a
  FATAL that arrived while the connection sat idle). The writer reads its own outcome on a
  fresh connection and runs the statement again only if nothing is there
  (`leasegate.db.mint_pg`). A connection closed or reset without that message (a network
  failure, a relay, a timeout) may leave the backend running the statement to its commit
  later: such a write is answered 503 `unavailable` and never retried.

Timing: with a `calls` observer (the store metrics, `leasegate.web.store_metrics`), each lent
connection's block is one call: timed from the moment the connection is in hand (pool wait and
connecting excluded, as SQLAlchemy's statement timing excludes them) to the block's end; a
block (or a connection attempt) that fails with a store error counts as failed instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg

from leasegate.core.ports.calls import CallObserver
from leasegate.core.ports.errors import StoreError, StoreUnavailable
from leasegate.pg.errors import RAW_CALL_ERRORS, store_error

POOL_WAIT_S = 30.0
"""As the engine's pool: a burst queued on one account's row lock waits this long."""

_CONNECTION_CLASSES = ("08", "57")
"""SQLSTATE classes after which the connection is not reused: connection exception and
operator intervention (shutdown, termination, crash recovery)."""

PING_TIMEOUT_S = 2.0
"""/readyz's database probe gives up after this long."""
PG_POOL_SIZE = 16
"""asyncpg connections per process for the hot paths, beside SQLAlchemy's engine's
(`LEASEGATE_DATABASE_POOL_SIZE`)."""


T = TypeVar("T")

_SERVER_ENDED = (asyncpg.AdminShutdownError, asyncpg.CrashShutdownError)
"""The server's own FATAL as it ends a backend: its statement committed already or never will."""
_LOST: tuple[type[BaseException], ...] = (
    *_SERVER_ENDED,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # the server's FATAL arrived while the connection sat idle: asyncpg then refuses the next
    # statement before sending it ("cannot switch to state ...")
    asyncpg.exceptions.InternalClientError,
    ConnectionResetError,
    BrokenPipeError,
)


def ended_by_server(error: StoreError) -> bool:
    """Whether the server itself ended the connection that failed with `error` (see the
    module docstring: the one case where a write's outcome can be read back and trusted).
    Mid-statement, asyncpg raises `ConnectionDoesNotExistError` with the server's FATAL as
    its cause."""
    cause = error.__cause__
    return isinstance(cause, _SERVER_ENDED) or (
        isinstance(cause, asyncpg.ConnectionDoesNotExistError)
        and isinstance(cause.__cause__, _SERVER_ENDED)
    )


def never_sent(error: StoreError) -> bool:
    """Whether asyncpg refused the statement before sending it: its protocol was left in
    another state (the server's FATAL arrived while the connection sat idle), and it raises
    `InternalClientError` ("cannot switch to state ...") before writing Bind/Execute. Nothing
    of it reached the server, so nothing of it can commit."""
    return isinstance(error.__cause__, asyncpg.exceptions.InternalClientError)


def lost_connection(error: StoreError) -> bool:
    """Whether `error` came from a connection that was lost (ended by the server, closed,
    reset), not from a deadline or a database that cannot be reached at all."""
    cause = error.__cause__
    return isinstance(cause, _LOST) and not isinstance(
        cause, asyncpg.exceptions.ConnectionFailureError
    )


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Postgres call deadlines; the defaults are those of `LEASEGATE_DATABASE_*_TIMEOUT_S`."""

    connect_s: float = 3.0
    command_s: float | None = 5.0
    """None: statements are not bounded (migrations)."""


class PgPool:
    """At most `size` asyncpg connections, opened on first use and kept."""

    def __init__(
        self,
        connect_kwargs: Mapping[str, Any],
        *,
        size: int,
        connect_s: float,
        command_s: float | None,
        calls: CallObserver | None = None,
    ) -> None:
        self._connect_kwargs = dict(connect_kwargs)
        self.calls = calls
        """Told of every call (see the module docstring); None: nothing is timed."""
        self._connect_s = connect_s
        self._command_s = command_s
        self._slots = asyncio.Semaphore(size)
        self._idle: list[asyncpg.Connection] = []
        self._generation = 0

    @asynccontextmanager
    async def connection(
        self, passthrough: tuple[type[BaseException], ...] = ()
    ) -> AsyncIterator[asyncpg.Connection]:
        """A connection for one or a few statements. Driver errors listed in `passthrough`
        (refusals the caller maps itself) propagate unchanged; a broken connection is dropped
        either way."""
        try:
            async with asyncio.timeout(POOL_WAIT_S):
                await self._slots.acquire()
        except TimeoutError:
            raise StoreUnavailable("pool-timeout") from None
        calls = self.calls
        try:
            try:
                connection = self._lend_idle() or await self._connect()
            except StoreUnavailable:
                if calls is not None:
                    calls.failed()
                raise
            generation = self._generation
            started = time.perf_counter()
            try:
                yield connection
            except BaseException as exc:
                if _connection_survives(exc):
                    self._give_back(connection, generation)
                else:
                    connection.terminate()
                    self.expire()
                if isinstance(exc, RAW_CALL_ERRORS):
                    if calls is not None:
                        calls.failed()
                    if not isinstance(exc, passthrough):
                        raise store_error(exc) from exc
                elif calls is not None:
                    calls.succeeded(time.perf_counter() - started)  # the caller's own exception
                raise
            if calls is not None:
                calls.succeeded(time.perf_counter() - started)
            self._give_back(connection, generation)
        finally:
            self._slots.release()

    async def read(self, call: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`call` (statements that change nothing) on a lent connection; run once more on a
        fresh one if the first connection turned out lost (see the module docstring)."""
        try:
            async with self.connection() as connection:
                return await call(connection)
        except StoreUnavailable as exc:
            if not lost_connection(exc):
                raise
        async with self.connection() as connection:
            return await call(connection)

    async def _connect(self) -> asyncpg.Connection:
        try:
            return await asyncpg.connect(
                **self._connect_kwargs,
                timeout=self._connect_s,
                command_timeout=self._command_s,
            )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from exc

    def _lend_idle(self) -> asyncpg.Connection | None:
        """The most recently returned idle connection the server has not closed. A backend
        the server ended (a restart, a failover, `pg_terminate_backend`) closes its socket;
        the driver notices on this loop and marks the connection closed, so checking costs no
        round trip (unlike a ping before each call)."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.is_closed():
                return connection
            connection.terminate()
        return None

    def _give_back(self, connection: asyncpg.Connection, generation: int) -> None:
        if generation != self._generation or connection.is_closed():
            connection.terminate()
        else:
            self._idle.append(connection)

    def expire(self) -> None:
        """Drop every idle connection; those lent out are dropped when they come back."""
        self._generation += 1
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.terminate()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        self._generation += 1
        for connection in idle:
            try:
                async with asyncio.timeout(self._connect_s):
                    await connection.close()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                connection.terminate()


def _connection_survives(exc: BaseException) -> bool:
    """A statement error the server answered (the connection is fine), not a broken link."""
    if isinstance(exc, asyncpg.PostgresError) and not isinstance(
        exc, asyncpg.PostgresConnectionError
    ):
        return str(exc.sqlstate or "")[:2] not in _CONNECTION_CLASSES
    if isinstance(exc, asyncpg.exceptions.DataError):
        return True  # a value the driver could not encode: nothing was sent
    return not isinstance(
        exc, asyncpg.InterfaceError | OSError | asyncio.CancelledError | TimeoutError
    ) and isinstance(exc, Exception)
