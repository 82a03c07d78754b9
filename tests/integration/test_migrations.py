"""The migrations build, from an empty database of either kind, exactly what the models say."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from leasegate.db import Database, upgrade
from leasegate.db.migrate import alembic_config
from leasegate.db.models import Base
from leasegate.db.partitions import include_name, is_partition_name

REPO_ROOT = Path(__file__).resolve().parents[2]

TABLES = {
    "account_leases",
    "alembic_version",
    "audit_anchor",
    "audit_records",
    "evidence",
    "keys",
    "mint_decisions",
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    url: str = request.getfixturevalue("fresh_pg_database")
    return url


def _drift(connection: Connection) -> list[Any]:
    opts = {"compare_type": True, "include_name": include_name}
    context = MigrationContext.configure(connection, opts=opts)
    return list(compare_metadata(context, Base.metadata))


def _tables(connection: Connection) -> set[str]:
    """The tables, evidence's partitions (Postgres) left out: they are data, not schema."""
    return {name for name in inspect(connection).get_table_names() if not is_partition_name(name)}


async def _schema(url: str) -> tuple[set[str], list[Any]]:
    db = Database.connect(url)
    try:
        async with db.engine.connect() as connection:
            tables = await connection.run_sync(_tables)
            drift = await connection.run_sync(_drift)
    finally:
        await db.dispose()
    return tables, drift


async def test_upgrade_builds_exactly_the_models(empty_database_url: str) -> None:
    await asyncio.to_thread(upgrade, empty_database_url)

    tables, drift = await _schema(empty_database_url)

    assert tables == TABLES
    assert drift == []


async def test_upgrade_is_repeatable_and_downgrade_round_trips(empty_database_url: str) -> None:
    await asyncio.to_thread(upgrade, empty_database_url)
    await asyncio.to_thread(upgrade, empty_database_url)  # already at head: nothing to do

    config = alembic_config(empty_database_url)
    await asyncio.to_thread(_downgrade_to_base, config)
    tables, _ = await _schema(empty_database_url)
    assert tables == {"alembic_version"}

    await asyncio.to_thread(upgrade, empty_database_url)
    tables, drift = await _schema(empty_database_url)
    assert tables == TABLES
    assert drift == []


def _downgrade_to_base(config: Config) -> None:
    command.downgrade(config, "base")


@pytest.mark.slow
async def test_alembic_cli_upgrades_head_from_the_repository_root(tmp_path: Path) -> None:
    alembic = Path(sys.executable).with_name("alembic")
    by_option = f"sqlite+aiosqlite:///{tmp_path / 'by-option.db'}"
    by_variable = f"sqlite+aiosqlite:///{tmp_path / 'by-variable.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}

    runs = [
        [str(alembic), "-x", f"url={by_option}", "upgrade", "head"],
        [str(alembic), "upgrade", "head"],
    ]
    envs = [env, {**env, "LEASEGATE_DATABASE_URL": by_variable}]
    for argv, run_env in zip(runs, envs, strict=True):
        done = await asyncio.to_thread(
            subprocess.run,
            argv,
            cwd=REPO_ROOT,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    for url in (by_option, by_variable):
        tables, drift = await _schema(url)
        assert tables == TABLES
        assert drift == []
