"""`leasegate evidence prune --before DATE`: remove every evidence row that started before
00:00 UTC on DATE, straight on `LEASEGATE_DATABASE_URL` (no running server needed).

On Postgres whole daily partitions are dropped (plus any rows of those days the default
partition holds); on SQLite the rows are deleted. DATE may not be after today (UTC): pruning
never reaches today's rows. `LEASEGATE_EVIDENCE_RETENTION_DAYS` does the same every hour.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from leasegate.config import Config
from leasegate.core.ports.errors import StoreError

if TYPE_CHECKING:
    from leasegate.db.partitions import Pruned

EVIDENCE_COMMAND = "evidence"


def add_evidence_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evidence = commands.add_parser(EVIDENCE_COMMAND, help="evidence table upkeep")
    actions = evidence.add_subparsers(dest="evidence_command", required=True)
    prune = actions.add_parser(
        "prune", help="remove evidence that started before DATE (whole partitions on Postgres)"
    )
    prune.add_argument(
        "--before", required=True, type=_day, metavar="YYYY-MM-DD", help="first day to keep"
    )


def run_evidence(args: argparse.Namespace, config: Config) -> int:
    before: date = args.before
    today = datetime.now(UTC).date()
    if before > today:
        sys.stderr.write(f"leasegate evidence prune: --before {before} is after today ({today})\n")
        return 2
    try:
        pruned = asyncio.run(_prune(config.settings.database_url, before))
    except StoreError as exc:
        sys.stderr.write(
            f"leasegate evidence prune: database error: {exc.reason} "
            "(unreachable, or not migrated: run `leasegate migrate`)\n"
        )
        return 1
    dropped = ", ".join(pruned.dropped) or "none"
    sys.stdout.write(
        f"evidence before {before}: partitions dropped: {dropped}; "
        f"rows deleted: {pruned.deleted_rows}\n"
    )
    return 0


async def _prune(url: str, before: date) -> Pruned:
    # imported here: every server process imports this module for its parser, and only this
    # command needs SQLAlchemy's engine
    from leasegate.db.engine import Database
    from leasegate.db.partitions import EvidencePartitions

    db = Database.connect(url)
    try:
        return await EvidencePartitions(db).prune(before)
    finally:
        await db.dispose()


def _day(raw: str) -> date:
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {raw!r}") from None
