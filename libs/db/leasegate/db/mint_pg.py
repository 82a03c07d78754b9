"""A mint's and a renewal's reservation on Postgres: one call of `leasegate_commit_mint`
(migration `mint_function`) or `leasegate_renew_key` (migration `renew_function`), one round
trip on a plain asyncpg connection (`Database.pg`), no unit of work.

Each function runs the same steps as `leasegate.db.mint`'s SQLite path in one statement, so in
one transaction. Their refusals come back as SQLSTATEs of our own (class `LG`), and a
concurrent writer that wins a UNIQUE race as the constraint's name; both become the refusals
of `leasegate.core.ports.storage` here. asyncpg prepares each statement once per connection.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    IdempotencyKeyTaken,
    KeyNotLive,
    LeaseCapacityExhausted,
)
from leasegate.core.records import KeyRecord, MintDecision
from leasegate.db.convert import decision_values, key_values
from leasegate.db.engine import Database
from leasegate.pg.errors import store_error
from leasegate.pg.keys import get_decision
from leasegate.pg.pool import ended_by_server, never_sent
from leasegate.pg.rows import KEY_COLUMNS, key_of_row

_COMMIT_MINT = "SELECT leasegate_commit_mint($1::json, $2::json, $3, $4, $5)"
_RENEW_KEY = f"SELECT {KEY_COLUMNS} FROM leasegate_renew_key($1, $2::json, $3::json, $4, $5, $6)"  # noqa: S608 - fixed column names
_RECORD_DECISION = (
    "INSERT INTO mint_decisions SELECT * FROM json_populate_record(NULL::mint_decisions, $1::json)"
)

_REFUSALS: dict[str, type[Exception]] = {
    "LG001": AdminStateMoved,
    "LG002": DispatchLeaseHeld,
    "LG003": LeaseCapacityExhausted,
    "LG004": CitedDecisionSuperseded,
    "LG005": KeyNotLive,
    "LG006": ValueError,  # a renewal onto another account: the caller's bug
}

_UNIQUE_RACES: tuple[tuple[str, type[Exception]], ...] = (
    ("live_dispatch", DispatchLeaseHeld),
    ("idempotency_key", IdempotencyKeyTaken),
    ("successor_id", CitedDecisionSuperseded),
)

_ANSWERED = (asyncpg.UnknownPostgresError, asyncpg.UniqueViolationError)
"""What the functions refuse with (our own SQLSTATEs are unknown to asyncpg): the connection
stays good, and `_refusal` maps it."""


async def commit_mint_pg(
    db: Database,
    decision: MintDecision,
    key: KeyRecord,
    *,
    lease_capacity: int | None,
    now: datetime,
    admin_revision: int | None,
) -> None:
    decision_doc, key_doc = _document(decision_values(decision)), _document(key_values(key))
    args = (decision_doc, key_doc, now, lease_capacity, admin_revision)
    try:
        await _commit_mint(db, args)
    except StoreUnavailable as exc:
        # The server ended the backend (a restart, a failover): the mint committed before
        # that, and is there to read, or it never will; or asyncpg never sent it
        # (`leasegate.pg.pool`). Any other lost connection may still commit later: never
        # run again, the caller gets a 503.
        if not (ended_by_server(exc) or never_sent(exc)):
            raise
        if await get_decision(db.pg, decision.id) is None:
            await _commit_mint(db, args)


async def _commit_mint(db: Database, args: tuple[Any, ...]) -> None:
    try:
        async with db.pg.connection(_ANSWERED) as connection:
            await connection.execute(_COMMIT_MINT, *args)
    except _ANSWERED as exc:
        raise _refusal(exc) from None


async def renew_key_pg(
    db: Database,
    old_key_id: str,
    decision: MintDecision,
    new_key: KeyRecord,
    *,
    lease_capacity: int | None,
    now: datetime,
    admin_revision: int | None,
) -> KeyRecord:
    decision_doc, key_doc = _document(decision_values(decision)), _document(key_values(new_key))
    try:
        async with db.pg.connection(_ANSWERED) as connection:
            row = await connection.fetchrow(
                _RENEW_KEY, old_key_id, decision_doc, key_doc, now, lease_capacity, admin_revision
            )
    except _ANSWERED as exc:
        raise _refusal(exc) from None
    if row is None:  # the function returns a row or raises
        raise KeyNotLive(old_key_id)
    return key_of_row(row)


async def record_decision_pg(db: Database, decision: MintDecision) -> None:
    """A refused mint: the decision alone."""
    try:
        async with db.pg.connection(_ANSWERED) as connection:
            await connection.execute(_RECORD_DECISION, _document(decision_values(decision)))
    except _ANSWERED as exc:
        raise _refusal(exc) from None


def _document(values: dict[str, Any]) -> str:
    return json.dumps(values, default=_instant)


def _instant(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a column value")


def _refusal(exc: asyncpg.PostgresError) -> Exception:
    """The refusal the function (or a concurrent writer) answered; else the core's
    `StoreError` for it."""
    refusal = _REFUSALS.get(exc.sqlstate or "")
    if refusal is not None:
        return refusal(str(exc))
    if isinstance(exc, asyncpg.UniqueViolationError):  # a concurrent writer won
        message = f"{exc.constraint_name or ''} {exc}"
        for constraint, raced in _UNIQUE_RACES:
            if constraint in message:
                return raced(message)
    return store_error(exc)
