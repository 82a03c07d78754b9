"""What the operator console browses: the live keys, recent dispatches, traffic per account.

Read-only, bounded reads (each takes a `limit` or a time window) for a person looking at the
gateway, not for the mint's hot path. Implemented by `leasegate.db.browse` on SQLite and
Postgres; a store that fails a call raises a `StoreError` (`leasegate.core.ports.errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from leasegate.core.records import DecisionOutcome


@dataclass(frozen=True, slots=True)
class LiveKey:
    """A key that is live now: never its secret or the secret's hash."""

    key_id: str
    tenant: str
    dispatch_id: str
    account_id: str
    model: str
    served_model: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class DispatchSummary:
    """One dispatch's decisions within a time window (the ones the filters kept)."""

    tenant: str
    dispatch_id: str
    decisions: int
    selected: int
    refused: int
    max_hop: int
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, slots=True)
class TrafficPoint:
    """An account's evidence rows started in `[start, start + bucket)`."""

    account_id: str | None
    """None for rows the gateway refused before choosing an account."""
    start: datetime
    requests: int
    failures: int
    """Rows whose outcome is neither `success` nor `client-abort`."""


NOT_FAILURES: tuple[str, ...] = ("success", "client-abort")
"""Outcomes the traffic chart does not count as failures: served, or the caller left."""


class Browse(Protocol):
    async def live_keys(
        self, now: datetime, *, tenant: str | None, account_id: str | None, limit: int
    ) -> list[LiveKey]:
        """Keys live at `now` (not revoked, not expired), newest first."""
        ...

    async def recent_dispatches(
        self,
        since: datetime,
        until: datetime,
        *,
        tenant: str | None,
        outcome: DecisionOutcome | None,
        limit: int,
    ) -> list[DispatchSummary]:
        """The dispatches with a decision created in `[since, until)` (of that tenant and
        outcome when given), the most recently decided first: at most `limit`, found among the
        latest decisions kept (a bounded read however long the range), each with the counts
        of its decisions kept."""
        ...

    async def traffic(
        self, since: datetime, until: datetime, bucket_s: int, *, account_ids: Sequence[str]
    ) -> list[TrafficPoint]:
        """Requests and failures per account and bucket of `bucket_s` seconds (aligned to the
        epoch) for rows started in `[since, until)`; empty buckets are absent. `account_ids`
        empty: every account."""
        ...
