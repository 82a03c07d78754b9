"""Durable storage on SQLite (aiosqlite) and Postgres (asyncpg): models, migrations, Store."""

from leasegate.db.engine import Database
from leasegate.db.migrate import upgrade
from leasegate.db.store import Store

__all__ = ["Database", "Store", "upgrade"]
