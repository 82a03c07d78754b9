"""Alembic environment: async engines for both databases, URL from the caller.

The URL comes from, in order: `-x url=...`, the config's `sqlalchemy.url` (set by
leasegate.db.migrate.upgrade), then LEASEGATE_DATABASE_URL through Settings.
"""

from __future__ import annotations

import asyncio
import logging.config

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from leasegate.config import Settings
from leasegate.db.engine import make_engine
from leasegate.db.models import Base
from leasegate.db.partitions import include_name

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _database_url() -> str:
    from_cli = context.get_x_argument(as_dictionary=True).get("url")
    if from_cli:
        return from_cli
    from_config = config.get_main_option("sqlalchemy.url")
    if from_config:
        return from_config
    return Settings().database_url


def _configure(connection: Connection | None, url: str | None = None) -> None:
    sqlite = (connection.dialect.name if connection is not None else url or "").startswith("sqlite")
    context.configure(
        connection=connection,
        url=url,
        target_metadata=target_metadata,
        compare_type=True,
        include_name=include_name,
        # SQLite cannot ALTER most things; batch mode copies the table instead
        render_as_batch=sqlite,
    )


def _run_sync(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online(url: str) -> None:
    engine = make_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
            await connection.commit()
    finally:
        await engine.dispose()


def main() -> None:
    url = _database_url()
    if context.is_offline_mode():
        _configure(None, url)
        with context.begin_transaction():
            context.run_migrations()
    else:
        asyncio.run(_run_online(url))


main()
