"""A mint's reservation on Postgres: one call of `leasegate_commit_mint` (migration
`mint_function`), one round trip, no unit of work.

The function runs the same steps as `leasegate.db.mint`'s SQLite path in one statement, so in
one transaction. Its refusals come back as SQLSTATEs of our own (class `LG`), and a concurrent
writer that wins a UNIQUE race as the constraint's name; both become the refusals of
`leasegate.core.ports.storage` here.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    IdempotencyKeyTaken,
    LeaseCapacityExhausted,
)
from leasegate.core.records import KeyRecord, MintDecision
from leasegate.db.convert import decision_values, key_values
from leasegate.db.engine import Database

_COMMIT_MINT = text(
    "SELECT leasegate_commit_mint("
    "CAST(:decision AS json), CAST(:key AS json), :now, :lease_capacity, :admin_revision)"
)

_REFUSALS: dict[str, type[Exception]] = {
    "LG001": AdminStateMoved,
    "LG002": DispatchLeaseHeld,
    "LG003": LeaseCapacityExhausted,
    "LG004": CitedDecisionSuperseded,
}

_UNIQUE_RACES: tuple[tuple[str, type[Exception]], ...] = (
    ("live_dispatch", DispatchLeaseHeld),
    ("idempotency_key", IdempotencyKeyTaken),
    ("successor_id", CitedDecisionSuperseded),
)


async def commit_mint_pg(
    db: Database,
    decision: MintDecision,
    key: KeyRecord,
    *,
    lease_capacity: int | None,
    now: datetime,
    admin_revision: int | None,
) -> None:
    params = {
        "decision": _document(decision_values(decision)),
        "key": _document(key_values(key)),
        "now": now,
        "lease_capacity": lease_capacity,
        "admin_revision": admin_revision,
    }
    async with db.connection(_refusal) as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(_COMMIT_MINT, params)


def _document(values: dict[str, Any]) -> str:
    return json.dumps(values, default=_instant)


def _instant(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a column value")


def _refusal(exc: DBAPIError) -> Exception | None:
    """The refusal the function (or a concurrent writer) answered; None for a failure."""
    state = getattr(exc.orig, "sqlstate", None)
    refusal = _REFUSALS.get(state or "")
    if refusal is not None:
        return refusal(str(exc.orig))
    if state == "23505":  # unique_violation: a concurrent writer won
        message = str(exc.orig)
        for constraint, raced in _UNIQUE_RACES:
            if constraint in message:
                return raced(message)
    return None
