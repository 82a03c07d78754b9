"""The proxy's stores: the shared ones of `leasegate.web.wiring` and, on Postgres, the database
over plain asyncpg (`PgProxyStore`), so a proxy never imports SQLAlchemy (20-30 MB of resident
memory) and installs without it. On any other database (SQLite: the embedded mode's, or a
single-process trial) the proxy reads and writes through `leasegate.db`'s SQLAlchemy store,
which the `leasegate-db` distribution brings."""

from __future__ import annotations

from leasegate.config import Config
from leasegate.pg.pool import Deadlines
from leasegate.pg.proxy_store import PgProxyStore
from leasegate.pg.url import is_postgres
from leasegate.web.wiring import ProxyDatabase, ProxyStores, database_deadlines, open_kv


def open_proxy_stores(config: Config) -> ProxyStores:
    """Construct (without connecting) a proxy's stores for this config."""
    settings = config.settings
    deadlines = database_deadlines(settings)
    durable: ProxyDatabase
    if is_postgres(settings.database_url):
        durable = PgProxyStore.connect(
            settings.database_url, deadlines, settings.database_pool_size
        )
    else:
        durable = _sql_store(settings.database_url, deadlines, settings.database_pool_size)
    return ProxyStores(durable=durable, **open_kv(config).parts())


def _sql_store(url: str, deadlines: Deadlines, pool_size: int) -> ProxyDatabase:
    try:
        from leasegate.db.engine import Database
        from leasegate.db.proxy_sql import SqlProxyStore
        from leasegate.db.store import Store
    except ImportError as missing:  # a proxy-only install on a database other than Postgres
        raise SystemExit(
            "this proxy's database is not Postgres: install leasegate-db (SQLAlchemy) "
            f"to serve it ({missing.name} is missing)"
        ) from None
    return SqlProxyStore(Store(Database.connect(url, deadlines, pool_size)))
