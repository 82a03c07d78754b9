"""SQLAlchemy's side of the error translation: what `Database.session()` and
`Database.connection()` catch, and the caller's own refusals. The rule itself is
`leasegate.pg.errors.store_error`, shared with the plain asyncpg path (which imports none of
this).

A caller that expects some driver errors as answers (a UNIQUE race a concurrent writer won, a
SQLSTATE of our own) passes a `Refusal`: it names the refusal, or None for a failure.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from leasegate.pg.errors import DRIVER_ERRORS, store_error

ENGINE_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, *DRIVER_ERRORS)
"""What a call through SQLAlchemy may raise when the database, not the code, is at fault."""

Refusal = Callable[[DBAPIError], Exception | None]
"""The refusal a driver error stands for, or None when it is a failure."""


def translated(exc: BaseException, refusal: Refusal | None = None) -> Exception:
    """What to raise instead of a driver error: the caller's refusal, else a StoreError."""
    if refusal is not None and isinstance(exc, DBAPIError):
        refused = refusal(exc)
        if refused is not None:
            return refused
    return store_error(exc)


def disconnected(error: BaseException | None) -> bool:
    """Whether a SQLAlchemy error says its connection was found lost (the server ended it, or
    the socket closed), not a deadline, a refused connection or the statement itself: the one
    failure after which a read may run again on a fresh connection."""
    return (
        isinstance(error, DBAPIError)
        and error.connection_invalidated
        and not isinstance(error.orig, TimeoutError)
    )
