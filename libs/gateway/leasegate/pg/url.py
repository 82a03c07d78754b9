"""A database URL read without SQLAlchemy: which backend it names, and asyncpg's connect
arguments for a Postgres one. Both `Database.pg` and the proxy's store
(`leasegate.pg.proxy_store`) open their asyncpg connections from `connect_kwargs`, so a URL means
the same connection either way, with or without SQLAlchemy loaded.

`postgresql+asyncpg://user:password@host:port/database?ssl=require` gives asyncpg's `user`,
`password`, `host`, `port`, `database`, and each query option as given (`ssl=require`,
`host=/run/postgresql` for a socket); an option given twice is a tuple (several hosts), as
SQLAlchemy passes it. SQLAlchemy's own `prepared_statement_cache_size` is dropped.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_SQLALCHEMY_ONLY = ("prepared_statement_cache_size",)


def backend(url: str) -> str:
    """`postgresql` or `sqlite` (the scheme before any `+driver`)."""
    return urlsplit(url).scheme.partition("+")[0]


def is_postgres(url: str) -> bool:
    return backend(url) in ("postgresql", "postgres")


def connect_kwargs(url: str) -> dict[str, Any]:
    """asyncpg.connect's keyword arguments for a Postgres URL (no deadlines: `PgPool` adds
    them)."""
    if not is_postgres(url):
        raise ValueError("not a Postgres URL")
    parts = urlsplit(url)
    kwargs: dict[str, Any] = {}
    if parts.username:
        kwargs["user"] = unquote(parts.username)
    if parts.password is not None:
        kwargs["password"] = unquote(parts.password)
    if parts.hostname:
        kwargs["host"] = unquote(parts.hostname)
    if parts.port is not None:
        kwargs["port"] = parts.port
    database = unquote(parts.path.lstrip("/"))
    if database:
        kwargs["database"] = database
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if name in _SQLALCHEMY_ONLY:
            continue
        kwargs[name] = values[0] if len(values) == 1 else tuple(values)
    if "port" in kwargs and isinstance(kwargs["port"], str):
        kwargs["port"] = int(kwargs["port"])
    return kwargs
