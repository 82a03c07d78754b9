"""What every store port raises when its store fails a call, whatever the driver behind it.

    StoreError              a store failed the call (catch this when either kind will do)
      StoreUnavailable      it could not be reached, did not answer within its deadline, or
                            answered with an error about its own state (restarting, read-only,
                            failing over): the same call may succeed later. A write may or may
                            not have happened.
      StoreRejected         it refused the call's content (a value it cannot encode or store,
                            a violated constraint): the same call can never succeed.

The adapters (`leasegate.db`, `leasegate.kv`) translate their drivers' exceptions into these at
their boundary (`leasegate.pg.errors`, `leasegate.kv.errors`); nothing above them sees a
SQLAlchemy, asyncpg, sqlite3 or redis exception. The refusals a store decides on purpose
(`DispatchLeaseHeld` and the others of `leasegate.core.ports.storage`) are not failures and
are not StoreErrors.
"""

from __future__ import annotations


class StoreError(Exception):
    """A store failed a call."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        """A short machine string: the driver's error class. Never a value of the call."""


class StoreUnavailable(StoreError):
    """The store cannot answer now: retry the same call later."""


class StoreRejected(StoreError):
    """The store refused the content: retrying the same call cannot succeed."""


def failure_reason(exc: BaseException) -> str:
    """What a log line says about a failed call: a StoreError's reason, else the error's class
    (a caller's own deadline: `TimeoutError`)."""
    return exc.reason if isinstance(exc, StoreError) else type(exc).__name__
