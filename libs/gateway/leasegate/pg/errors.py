"""The database drivers' exceptions, translated into the core's `StoreError`s by one rule.

Every call reaches the database through `Database.session()`/`Database.connection()`
(SQLAlchemy, `leasegate.db.engine`, which adds SQLAlchemy's own errors:
`leasegate.db.engine_errors`) or a `PgPool` connection (plain asyncpg); each catches the
driver's errors around its block and raises `store_error(...)` instead, so nothing above this
package sees SQLAlchemy, asyncpg or sqlite3. The `except` costs nothing while the call
succeeds. This module imports no SQLAlchemy: a proxy on Postgres never loads it.

The rule, `store_error`: content the database refuses is `StoreRejected` (Postgres SQLSTATE
classes 22 "data exception" and 23 "integrity constraint violation", e.g. a NUL byte, an
oversized value, a NOT NULL violation; SQLite's integrity and data errors; or a value the
driver cannot encode, e.g. a lone surrogate); everything else (refused or terminated
connection, server shutting down, deadline, pool exhausted, a schema not migrated) is
`StoreUnavailable`. A SQLAlchemy error is judged by the driver error it wraps.
"""

from __future__ import annotations

import sqlite3
import sys

import asyncpg

from leasegate.core.ports.errors import StoreError, StoreRejected, StoreUnavailable

DRIVER_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    sqlite3.Error,
    OSError,  # a socket gone underneath the driver; TimeoutError (a deadline) is one
)
"""What a driver raises when the database, not the code, is at fault."""

RAW_CALL_ERRORS: tuple[type[Exception], ...] = (*DRIVER_ERRORS, ValueError, TypeError)
"""A raw asyncpg call adds the encoding errors SQLAlchemy would have wrapped (UnicodeError is
a ValueError): a value the driver cannot send."""

REJECTING_SQLSTATE_CLASSES = ("22", "23")

MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703", "42883"})
"""Undefined table, column, function: the database lacks a migration of this release."""

SCHEMA_NOT_MIGRATED = "schema-not-migrated"
"""The reason of a call that met a table, column or function the database does not have yet
(`leasegate migrate` has not run for this release): logged instead of the driver's class."""


def store_error(exc: BaseException) -> StoreError:
    """The core's error for a driver's (or SQLAlchemy's) error; its reason is the error's
    class (for a refusal SQLAlchemy wrapped, the wrapped driver error's)."""
    wrapped = _sqlalchemy_wrapped(exc)
    if wrapped is not None:
        refused, inner = wrapped
        if refused:
            return StoreRejected(type(inner).__name__)
    elif _refused(exc):
        return StoreRejected(type(exc).__name__)
    if _schema_missing(exc if wrapped is None else wrapped[1]):
        return StoreUnavailable(SCHEMA_NOT_MIGRATED)
    return StoreUnavailable(type(exc).__name__)


def _schema_missing(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).startswith(("no such table", "no such column", "no such function"))
    sqlstate = getattr(exc, "sqlstate", None) if isinstance(exc, Exception) else None
    return sqlstate in MISSING_SCHEMA_SQLSTATES


def _refused(exc: BaseException) -> bool:
    if isinstance(exc, ValueError | TypeError):
        return True  # the driver could not encode a value (asyncpg's DataError is a ValueError)
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.DataError):
        return True
    # asyncpg's server errors, and SQLAlchemy's adapters of them, carry the SQLSTATE
    sqlstate = getattr(exc, "sqlstate", None) if isinstance(exc, Exception) else None
    return str(sqlstate or "")[:2] in REJECTING_SQLSTATE_CLASSES


def _sqlalchemy_wrapped(exc: BaseException) -> tuple[bool, BaseException] | None:
    """(whether it is a refusal, the driver error inside) for a SQLAlchemy statement error,
    else None. Looked up without importing SQLAlchemy: a process that never loaded it cannot
    have raised one of its errors."""
    sa = sys.modules.get("sqlalchemy.exc")
    if sa is None or not isinstance(exc, sa.StatementError):
        return None
    inner: BaseException = exc.orig if exc.orig is not None else exc
    refused = isinstance(exc, sa.IntegrityError | sa.DataError) or _refused(inner)
    return refused, inner
