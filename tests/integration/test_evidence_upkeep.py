"""Evidence upkeep as an operator meets it: a control plane creates the coming days'
partitions and applies the retention setting on its own; `leasegate evidence prune` removes
whole days on demand and refuses what it should."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from time import sleep

import pytest

from leasegate.db import Store, upgrade
from leasegate.db.partitions import DAYS_AHEAD, EvidencePartitions, partition_name
from leasegate.demo.upstream import MockUpstream
from tests.fixtures.evidence import at, database_url, evidence_row
from tests.fixtures.gateways import account_entry, gateway_env, in_process_gateway
from tests.fixtures.services import production_stores

__all__ = ["database_url"]  # the fixture, over SQLite and Postgres


@pytest.fixture
def today() -> date:
    """Today (UTC), read when the test starts; within two minutes of midnight the test first
    waits for the next day, so the gateway and the test never disagree on which day it is."""
    now = datetime.now(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), time(), UTC)
    to_midnight = (midnight - now).total_seconds()
    if to_midnight < 120:
        sleep(to_midnight + 1)
    return datetime.now(UTC).date()


def _prune(url: str, before: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEGATE_")}
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "leasegate.cli.main", "evidence", "prune", "--before", before],
        env={**env, "LEASEGATE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _rows(url: str, *days: date) -> None:
    store = Store.connect(url)
    try:
        await store.write_evidence([evidence_row(f"r-{day}", at(day)) for day in days])
    finally:
        await store.close()


async def _request_ids(url: str) -> list[str]:
    store = Store.connect(url)
    try:
        return [row.request_id for row in await store.query_evidence()]
    finally:
        await store.close()


@pytest.mark.slow
async def test_prune_command_drops_whole_days_and_says_what_it_did(
    database_url: str, today: date
) -> None:
    old, kept = today - timedelta(days=5), today - timedelta(days=1)
    store = Store.connect(database_url)
    await EvidencePartitions(store.db).ensure(old, ahead=0)  # old-1, old
    await store.close()
    await _rows(database_url, old, kept)

    done = await asyncio.to_thread(_prune, database_url, kept.isoformat())

    assert done.returncode == 0, done.stderr
    assert await _request_ids(database_url) == [f"r-{kept}"]
    if database_url.startswith("postgresql"):
        dropped = f"{partition_name(old - timedelta(days=1))}, {partition_name(old)}"
        assert (
            done.stdout
            == f"evidence before {kept}: partitions dropped: {dropped}; rows deleted: 0\n"
        )
    else:
        assert done.stdout == f"evidence before {kept}: partitions dropped: none; rows deleted: 1\n"


@pytest.mark.slow
def test_prune_command_refuses_a_bad_or_future_date_and_an_unmigrated_database(
    tmp_path: Path, today: date
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/empty.db"
    bad = _prune(url, "last-week")
    assert bad.returncode == 2
    assert "not a date" in bad.stderr
    future = _prune(url, (today + timedelta(days=2)).isoformat())
    assert future.returncode == 2
    assert "after today" in future.stderr
    unmigrated = _prune(url, today.isoformat())
    assert unmigrated.returncode == 1
    assert unmigrated.stderr.count("\n") == 1
    assert "Traceback" not in unmigrated.stderr


@pytest.mark.postgres
async def test_a_control_plane_creates_partitions_ahead_and_applies_retention(
    tmp_path: Path, today: date
) -> None:
    async with production_stores() as stores, MockUpstream() as upstream:
        url = stores["database_url"]
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            extra={"LEASEGATE_EVIDENCE_RETENTION_DAYS": "3"},
            **stores,
        )
        await asyncio.to_thread(upgrade, url)
        store = Store.connect(url)
        await EvidencePartitions(store.db).ensure(today - timedelta(days=3), ahead=0)
        await store.close()
        await _rows(url, today - timedelta(days=4), today - timedelta(days=3), today)

        async with in_process_gateway(env, [upstream]):
            store = Store.connect(url)
            try:
                wanted = {partition_name(today + timedelta(days=n)) for n in range(DAYS_AHEAD + 1)}
                expired = partition_name(today - timedelta(days=4))
                for _ in range(200):
                    present = set(await EvidencePartitions(store.db).existing())
                    if wanted <= present and expired not in present:
                        break
                    await asyncio.sleep(0.05)
                assert wanted <= present
                assert expired not in present, "retention dropped the whole day"
            finally:
                await store.close()
        assert await _request_ids(url) == [f"r-{today}", f"r-{today - timedelta(days=3)}"]
