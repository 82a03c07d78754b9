"""The pool as the console draws it: accounts in registry order x served models.

Built from the accounts view (`control_plane.accounts`, the JSON the API serves) and the audit
chain's records (who last changed an account's state, when, why): no query of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from leasegate.audit import AuditRecord
from leasegate.control_plane.accounts import AccountsDeps, accounts_view
from leasegate.control_plane.deps import OverlayRecords

CellState = Literal["healthy", "cooling", "circuit-open"]


@dataclass(frozen=True, slots=True)
class Headroom:
    """The tightest of a cell's learned quota buckets: what is left of its limit now."""

    dimension: str
    remaining: int
    limit: int
    source: str

    @property
    def label(self) -> str:
        return f"{self.dimension} {self.remaining} / {self.limit} ({self.source})"


@dataclass(frozen=True, slots=True)
class Cell:
    state: CellState
    until: str | None = None
    reason: str | None = None
    trips: int | None = None
    headroom: Headroom | None = None


def headroom(quota: dict[str, Any] | None) -> Headroom | None:
    """The bucket with the least left (as a share of its limit), of those known now."""
    if quota is None:
        return None
    known = [b for b in quota["buckets"] if b["limit"] and b["remaining"] is not None]
    if not known:
        return None
    tight = min(known, key=lambda b: b["remaining"] / b["limit"])
    return Headroom(tight["dimension"], tight["remaining"], tight["limit"], quota["source"])


@dataclass(frozen=True, slots=True)
class Bar:
    used: int | None
    ceiling: int | None

    @property
    def percent(self) -> int:
        if not self.used or not self.ceiling:
            return 0
        return min(100, round(100 * self.used / self.ceiling))

    @property
    def label(self) -> str:
        used = "not counted" if self.used is None else str(self.used)
        return f"{used} / {self.ceiling}" if self.ceiling is not None else f"{used} (no ceiling)"


@dataclass(frozen=True, slots=True)
class Row:
    account_id: str
    provider: str
    configured: bool
    admin_state: str
    changed_by: AuditRecord | None
    """The record that set a non-enabled state: by whom, when, why."""
    cells: dict[str, Cell]
    """Served model -> its health; models the account does not serve are absent."""
    leases: Bar
    requests: Bar


@dataclass(frozen=True, slots=True)
class PoolView:
    models: list[str]
    """Every served model of the registry, in first-seen order: the grid's columns."""
    rows: list[Row]
    revision: int
    chain: str
    records: tuple[AuditRecord, ...]
    """The audit chain as read for this view."""


def last_change(records: Sequence[AuditRecord]) -> dict[str, AuditRecord]:
    latest: dict[str, AuditRecord] = {}
    for record in records:
        latest[record.account_id] = record
    return latest


async def pool_view(accounts: AccountsDeps, overlay: OverlayRecords) -> PoolView:
    """The grid of `accounts`' registry and the chain's records, as the Pool page draws it."""
    view = (await accounts_view(accounts)).model_dump(mode="json")  # as the API serves it
    _, snapshot = await overlay.read_full()
    changes = last_change(snapshot.records)
    models: list[str] = []
    rows: list[Row] = []
    for account, entry in zip(accounts.registry.accounts, view["accounts"], strict=True):
        served = list(dict.fromkeys(account.models.values()))
        models.extend(m for m in served if m not in models)
        rows.append(_row(entry, served, changes.get(account.id)))
    return PoolView(models, rows, view["revision"], view["chain"], snapshot.records)


def _row(entry: dict[str, Any], served: list[str], change: AuditRecord | None) -> Row:
    cooling = {c["model"]: c for c in entry["cooling_models"]}
    quotas = {q["model"]: q for q in entry.get("quota", ())}
    circuit = entry["circuit"]
    cells: dict[str, Cell] = {}
    for model in served:
        room = headroom(quotas.get(model))
        if circuit["open"]:
            cells[model] = Cell("circuit-open", circuit["until"], circuit["reason"], None, room)
        elif model in cooling:
            c = cooling[model]
            cells[model] = Cell("cooling", c["until"], c["reason"], c["trips"], room)
        else:
            cells[model] = Cell("healthy", headroom=room)
    admin_state = entry["admin_state"]
    return Row(
        account_id=entry["id"],
        provider=entry["provider"],
        configured=entry["configured"],
        admin_state=admin_state,
        changed_by=change if change is not None and admin_state != "enabled" else None,
        cells=cells,
        leases=Bar(entry["leases_held"], entry["lease_capacity"]),
        requests=Bar(entry["requests_in_flight"], entry["request_capacity"]),
    )
