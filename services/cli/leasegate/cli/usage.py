"""`leasegate usage`: the control plane's usage report as a table or CSV.

    leasegate usage [--since ISO] [--until ISO] [--group-by tenant,account,model,day]
                    [--format table|csv] [--url URL] [--token TOKEN]

Reads every page of `GET /control/v2/usage`. The token is `--token`, LEASEGATE_CONTROL_TOKEN
or LEASEGATE_ADMIN_TOKEN (a read: either token may).
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a command runs: a server process never needs httpx
    from leasegate.client import ControlClient

_COUNTS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cost",
    "estimated_requests",
)
_PAGE = 1000


def add_usage_command(commands: Any, client_options: Any) -> None:
    parser = commands.add_parser("usage", help="tokens, cost and requests from evidence")
    parser.add_argument("--since", default=None, help="ISO 8601 instant (default: today, UTC)")
    parser.add_argument("--until", default=None, help="ISO 8601 instant (default: now)")
    parser.add_argument("--group-by", default="account,model", help="tenant,account,model,day")
    parser.add_argument("--format", choices=("table", "csv"), default="table")
    client_options(parser)


def print_usage(control: ControlClient, args: argparse.Namespace) -> int:
    """Exit 0 with the report, 1 when the control plane refused the query, 2 for an
    instant that is not ISO 8601."""
    try:
        since = datetime.fromisoformat(args.since) if args.since else None
        until = datetime.fromisoformat(args.until) if args.until else None
    except ValueError:
        sys.stderr.write("leasegate: --since and --until take ISO 8601 instants\n")
        return 2
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    report: dict[str, Any] = {}
    while offset is not None:
        page = control.usage(
            since=since,
            until=until,
            group_by=args.group_by.split(","),
            limit=_PAGE,
            offset=offset,
        )
        # printed as sent: the model's own encoding of times and money
        report = page.model_dump(mode="json", exclude={"usage"})
        rows.extend(group.model_dump(mode="json", exclude_unset=True) for group in page.usage)
        offset = page.next_offset
    columns = [*report.get("group_by", []), *_COUNTS]
    if args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(row.get(c)) for c in columns] for row in rows])
        return 0
    currency = report.get("currency") or ""
    sys.stdout.write(f"usage {report.get('since')} .. {report.get('until')}  {currency}\n")
    table = [columns, *([_cell(row.get(c)) for c in columns] for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for line in table:
        sys.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))
        sys.stdout.write("\n")
    return 0


def _cell(value: object) -> str:
    return "" if value is None else str(value)
