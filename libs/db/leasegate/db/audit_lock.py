"""The lock between admin mutations and mints, on Postgres: a transaction-scoped advisory
lock, exclusive for a mutation and shared for a mint. It exists even before the audit
anchor row does, so the very first mutation of an empty chain is covered too. SQLite needs
none: every write transaction there is already serialised (BEGIN IMMEDIATE)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

# an arbitrary constant: the one advisory lock id this application takes
AUDIT_LOCK_ID = 0x1EA5E6A7E


async def lock_for_mutation(session: AsyncSession, dialect: str) -> None:
    if dialect == "postgresql":
        await session.execute(select(func.pg_advisory_xact_lock(AUDIT_LOCK_ID)))


async def lock_for_mint(session: AsyncSession, dialect: str) -> None:
    if dialect == "postgresql":
        await session.execute(select(func.pg_advisory_xact_lock_shared(AUDIT_LOCK_ID)))
