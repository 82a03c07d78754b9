"""The one reader of an upstream's (or the gateway's) wait: `retry-after-ms`, else
`Retry-After` as delta-seconds or an HTTP-date. The gateway itself writes delta-seconds
(`leasegate.core.errors.retry_after_header`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the upstream asked us to wait: `retry-after-ms`, else `Retry-After` (seconds
    or an HTTP-date). None when absent or unreadable. `headers`: a case-insensitive mapping
    (the upstream response's) or one with lower-case keys."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
