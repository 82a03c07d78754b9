"""Durable storage on SQLite (aiosqlite) and Postgres (asyncpg): models, migrations, Store.

Every name here is imported on first use, not with the package: `Database` and `Store` bring
SQLAlchemy (20-30 MB of resident memory), which a production proxy never loads (it reads and
writes through `leasegate.pg.proxy_store`, plain asyncpg), and `upgrade` (the migrations) brings
Alembic, which no serving process needs (about 10 MB more)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leasegate.db.engine import Database
    from leasegate.db.migrate import upgrade
    from leasegate.db.store import Store

__all__ = ["Database", "Store", "upgrade"]

_HOMES = {
    "Database": "leasegate.db.engine",
    "Store": "leasegate.db.store",
    "upgrade": "leasegate.db.migrate",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)
