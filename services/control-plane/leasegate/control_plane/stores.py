"""The control plane's stores (and the embedded mode's: both APIs in one process): the shared
ones of `leasegate.web.wiring`, and SQLAlchemy's `Database` and `Store` over the same database."""

from __future__ import annotations

from dataclasses import dataclass

from leasegate.config import Config
from leasegate.core.ports.sessions import ConsoleSessions
from leasegate.db.engine import Database
from leasegate.db.proxy_sql import SqlProxyStore
from leasegate.db.store import Store
from leasegate.kv.sessions_memory import InProcessConsoleSessions
from leasegate.kv.sessions_redis import RedisConsoleSessions
from leasegate.web.wiring import ProxyStores, database_deadlines, open_kv


@dataclass
class Stores(ProxyStores):
    """What the control plane (and the embedded mode, both APIs in one process) needs:
    SQLAlchemy's `Database` and `Store` too; `durable` is the same database."""

    database: Database
    store: Store
    console_sessions: ConsoleSessions
    """The console's open sessions, shared by every replica (`leasegate.core.ports.sessions`)."""


def open_stores(config: Config) -> Stores:
    """Construct (without connecting: the first use connects) every store for this config,
    the database through SQLAlchemy."""
    settings = config.settings
    database = Database.connect(
        settings.database_url, database_deadlines(settings), settings.database_pool_size
    )
    store = Store(database)
    kv = open_kv(config)
    return Stores(
        durable=SqlProxyStore(store),
        database=database,
        store=store,
        console_sessions=(
            InProcessConsoleSessions()
            if kv.redis is None
            else RedisConsoleSessions(kv.redis, settings.redis_prefix)
        ),
        **kv.parts(),
    )
