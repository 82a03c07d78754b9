"""Run the Alembic migrations programmatically: `leasegate migrate`, dev start-up, tests.

Synchronous because Alembic's env.py runs its own event loop; from async code call it as
`await asyncio.to_thread(upgrade, url)`.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

# libs/leasegate/db/migrate.py -> the repository root (the package is installed editable)
REPO_ROOT = Path(__file__).resolve().parents[3]
ALEMBIC_INI = REPO_ROOT / "alembic.ini"
SCRIPT_LOCATION = REPO_ROOT / "migrations"


def alembic_config(url: str) -> Config:
    config = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    # '%' is ConfigParser's interpolation character; a password may contain one
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    # The process has configured its own (JSON) logging; alembic.ini's is for the alembic CLI.
    config.attributes["configure_logger"] = False
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision` (an empty database is created from scratch)."""
    command.upgrade(alembic_config(url), revision)
