"""The database drivers' exceptions, translated into the core's `StoreError`s in one place.

Every call reaches the database through `Database.session()` or `Database.connection()`
(`leasegate.db.engine`); each catches `DRIVER_ERRORS` around its block and raises
`translated(...)` instead, so nothing above this package sees SQLAlchemy, asyncpg or sqlite3.
The `except` costs nothing while the call succeeds.

The rule, `store_error`: content the database refuses is `StoreRejected` (Postgres SQLSTATE
classes 22 "data exception" and 23 "integrity constraint violation", e.g. a NUL byte, an
oversized value, a NOT NULL violation; or a value the driver cannot encode, e.g. a lone
surrogate); everything else (refused or terminated connection, server shutting down, deadline,
pool exhausted, a schema not migrated) is `StoreUnavailable`.

A caller that expects some driver errors as answers (a UNIQUE race a concurrent writer won, a
SQLSTATE of our own) passes a `Refusal`: it names the refusal, or None for a failure.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import asyncpg
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError, StatementError

from leasegate.core.ports.errors import StoreError, StoreRejected, StoreUnavailable

DRIVER_ERRORS: tuple[type[Exception], ...] = (
    SQLAlchemyError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    sqlite3.Error,
    OSError,  # a socket gone underneath the driver; TimeoutError (a deadline) is one
)
"""What a call through SQLAlchemy may raise when the database, not the code, is at fault."""

RAW_CALL_ERRORS: tuple[type[Exception], ...] = (*DRIVER_ERRORS, ValueError, TypeError)
"""A raw asyncpg call adds the encoding errors SQLAlchemy would have wrapped (UnicodeError is
a ValueError): a value the driver cannot send."""

REJECTING_SQLSTATE_CLASSES = ("22", "23")

Refusal = Callable[[DBAPIError], Exception | None]
"""The refusal a driver error stands for, or None when it is a failure."""


def store_error(exc: BaseException) -> StoreError:
    """The core's error for one of `RAW_CALL_ERRORS`; its reason is the driver's error class."""
    if isinstance(exc, asyncpg.PostgresError):
        if str(exc.sqlstate or "")[:2] in REJECTING_SQLSTATE_CLASSES:
            return StoreRejected(type(exc).__name__)
        return StoreUnavailable(type(exc).__name__)
    if isinstance(exc, ValueError | TypeError):
        return StoreRejected(type(exc).__name__)  # the driver could not encode a value
    if isinstance(exc, IntegrityError | DataError):
        return StoreRejected(type(exc.orig).__name__)
    if isinstance(exc, StatementError) and isinstance(exc.orig, ValueError):
        return StoreRejected(type(exc.orig).__name__)
    return StoreUnavailable(type(exc).__name__)


def translated(exc: BaseException, refusal: Refusal | None = None) -> Exception:
    """What to raise instead of a driver error: the caller's refusal, else a StoreError."""
    if refusal is not None and isinstance(exc, DBAPIError):
        refused = refusal(exc)
        if refused is not None:
            return refused
    return store_error(exc)
