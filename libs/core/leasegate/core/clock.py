"""Time and identifiers, injected so that pure code and tests stay deterministic."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current UTC time, timezone-aware."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations only)."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


def new_id(prefix: str) -> str:
    """A random, URL-safe identifier such as `md_3f9c…` (96 bits of entropy)."""
    return f"{prefix}_{secrets.token_hex(12)}"


def to_epoch(at: datetime) -> float:
    return at.timestamp()


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def iso(at: datetime) -> str:
    """RFC 3339 with a `Z`, millisecond precision: the one wire format for times."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
