"""The console's Traffic page: requests and failures per account over a time range, from the
evidence rows, counted per bucket by the database and drawn here as inline SVG bars (no
script, nothing from another origin)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from leasegate.control_plane.console.charts import HEIGHT, WIDTH, Bar, bars
from leasegate.control_plane.console.deps import ConsoleDeps
from leasegate.control_plane.console.reads import DEFAULT_WINDOW, WINDOWS
from leasegate.control_plane.console.web import ConsoleAuth, console_router, page, unknown_filter
from leasegate.core.ports.browse import TrafficPoint

RANGES = {name: w.bucket_s for name, w in WINDOWS.items() if w.bucket_s is not None}
"""The time ranges this page offers (`reads.WINDOWS` that have a bucket), to their bucket."""
DEFAULT_RANGE = DEFAULT_WINDOW
NO_ACCOUNT = "(no account)"


@dataclass(frozen=True, slots=True)
class AccountTraffic:
    account: str
    requests: int
    failures: int
    bars: list[tuple[Bar, Bar]]
    """Per bucket: its requests' bar and, drawn over it, its failures' bar (one scale)."""


def bucket_starts(since: datetime, until: datetime, bucket_s: int) -> list[datetime]:
    """Every bucket (aligned to the epoch) that overlaps `[since, until)`: the last one may
    have begun less than a second before `until`."""
    first = int(since.timestamp()) // bucket_s * bucket_s
    end = math.ceil(until.timestamp())
    return [datetime.fromtimestamp(t, UTC) for t in range(first, end, bucket_s)]


def account_traffic(
    accounts: list[str], points: list[TrafficPoint], starts: list[datetime]
) -> list[AccountTraffic]:
    """One chart per account (registry order, then rows no account served), every bucket
    present, zero where no row started."""
    counted: dict[str, dict[datetime, TrafficPoint]] = {a: {} for a in accounts}
    for point in points:
        counted.setdefault(point.account_id or NO_ACCOUNT, {})[point.start] = point
    drawn = []
    for account, by_start in counted.items():
        labels = [s.strftime("%H:%M:%S") for s in starts]
        requests = [by_start[s].requests if s in by_start else 0 for s in starts]
        failures = [by_start[s].failures if s in by_start else 0 for s in starts]
        top = float(max(requests, default=0))
        shown = [f"{r} requests, {f} failed" for r, f in zip(requests, failures, strict=True)]
        drawn.append(
            AccountTraffic(
                account=account,
                requests=sum(requests),
                failures=sum(failures),
                bars=list(
                    zip(
                        bars(list(zip(labels, map(float, requests), strict=True)), shown, top),
                        bars(list(zip(labels, map(float, failures), strict=True)), shown, top),
                        strict=True,
                    )
                ),
            )
        )
    return drawn


def traffic_pages(deps: ConsoleDeps, auth: ConsoleAuth) -> APIRouter:
    router = console_router()

    @router.get("/traffic")
    async def traffic(request: Request, within: str = DEFAULT_RANGE) -> Response:
        session = await auth.session(request)
        if within not in RANGES:
            return unknown_filter(request, session, f"Time range: {', '.join(RANGES)}.")
        bucket_s = RANGES[within]
        until = deps.clock.now() + timedelta(microseconds=1)
        since = until - WINDOWS[within].span
        starts = bucket_starts(since, until, bucket_s)
        points = await deps.browse.traffic(starts[0], until, bucket_s, account_ids=())
        accounts = [a.id for a in deps.registry.accounts]
        context = {
            "nav": "traffic",
            "charts": account_traffic(accounts, points, starts),
            "ranges": tuple(RANGES),
            "within": within,
            "bucket": f"{bucket_s // 60} min" if bucket_s >= 60 else f"{bucket_s} s",
            "chart_size": (WIDTH, HEIGHT),
            "since": starts[0],
        }
        return page(request, "traffic.html", context, session=session)

    return router
