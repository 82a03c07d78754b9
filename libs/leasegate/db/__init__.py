"""Durable storage on SQLite (aiosqlite) and Postgres (asyncpg): models, migrations, Store.

`upgrade` (the migrations) is imported on first use: it brings Alembic, which a serving
process never needs (about 10 MB of resident memory in a proxy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leasegate.db.engine import Database
from leasegate.db.store import Store

if TYPE_CHECKING:
    from leasegate.db.migrate import upgrade

__all__ = ["Database", "Store", "upgrade"]


def __getattr__(name: str) -> Any:
    if name == "upgrade":
        from leasegate.db.migrate import upgrade

        return upgrade
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
