"""Run the Alembic migrations programmatically: `leasegate migrate`, dev start-up, tests.

Alembic is configured here, in code: no `alembic.ini` in the working directory is needed.
The scripts are `libs/gateway/migrations/` (both deployables read which revisions this release
expects: leasegate.schema); the leasegate-gateway wheel carries the same
folder as `leasegate/_migrations` (hatchling `force-include`), so an installed package
migrates from any directory.

Synchronous because Alembic's env.py runs its own event loop; from async code call it as
`await asyncio.to_thread(upgrade, url)`.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from leasegate.schema import migrations_folder


class MigrationError(Exception):
    """The database could not be migrated; str() is one line, never a password."""


def script_location() -> Path:
    """The migrations folder: the wheel's bundled copy, else the source checkout's."""
    folder = migrations_folder()
    if folder is None:
        raise MigrationError("no migrations found (neither leasegate/_migrations nor migrations/)")
    return folder


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.set_main_option("path_separator", "os")
    # '%' is ConfigParser's interpolation character; a password may contain one
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    # The process has configured its own (JSON) logging.
    config.attributes["configure_logger"] = False
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision` (an empty database is created from scratch).

    A database that does not exist or cannot be reached raises MigrationError."""
    _check_sqlite_folder(url)
    try:
        command.upgrade(alembic_config(url), revision)
    except DBAPIError as exc:
        raise MigrationError(f"cannot migrate {safe_url(url)}: {_reason(exc.orig)}") from None
    except (OSError, ArgumentError) as exc:
        raise MigrationError(f"cannot migrate {safe_url(url)}: {_reason(exc)}") from None


def _check_sqlite_folder(url: str) -> None:
    """SQLite creates its file but not its folder. Say so before connecting: a failed
    aiosqlite connect can print a worker thread's traceback as its event loop closes."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # upgrade() reports it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    folder = Path(parsed.database).parent
    if not folder.is_dir():
        raise MigrationError(f"cannot migrate {safe_url(url)}: the folder {folder} does not exist")


def safe_url(url: str) -> str:
    """The URL with its password masked, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable database URL>"


def _reason(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    if exc.__cause__ is not None:  # a driver error wrapped by SQLAlchemy's adapter
        exc = exc.__cause__
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
