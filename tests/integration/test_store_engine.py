"""Readiness: the database answers, or ping says it does not (without raising)."""

from __future__ import annotations

from leasegate.db import Database


async def test_ping_answers_for_a_reachable_database(migrated_url: str) -> None:
    db = Database.connect(migrated_url)
    try:
        assert await db.ping()
    finally:
        await db.dispose()


async def test_ping_reports_an_unreachable_database() -> None:
    db = Database.connect("postgresql+asyncpg://postgres@127.0.0.1:1/leasegate")
    try:
        assert not await db.ping()
    finally:
        await db.dispose()
