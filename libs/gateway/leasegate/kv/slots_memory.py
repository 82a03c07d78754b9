"""Request slots for the embedded single-process mode: one reservation table per account.

Every method runs without awaiting, so on one event loop each call is atomic, which is what the
Lua scripts give the Redis twin across processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from leasegate.capacity.table import ReservationTable


class InProcessRequestSlots:
    def __init__(self, lease_s: float) -> None:
        if lease_s <= 0:
            raise ValueError("lease_s must be positive")
        self._lease_s = lease_s
        self._tables: dict[str, ReservationTable] = {}

    @property
    def lease_s(self) -> float:
        return self._lease_s

    async def acquire(self, account_id: str, holder: str, capacity: int, now: float) -> bool:
        table = self._tables.setdefault(account_id, ReservationTable())
        return table.reserve(holder, capacity, now, self._lease_s)

    async def release(self, account_id: str, holders: Sequence[str]) -> int:
        table = self._tables.get(account_id)
        return 0 if table is None else sum(table.release(holder) for holder in holders)

    async def renew(self, account_id: str, holders: Sequence[str], now: float) -> None:
        table = self._tables.get(account_id)
        if table is not None:
            table.renew(holders, now, self._lease_s)

    async def in_flight(self, account_ids: Sequence[str], now: float) -> dict[str, int]:
        counts: dict[str, int] = {}
        for account_id in account_ids:
            table = self._tables.get(account_id)
            counts[account_id] = 0 if table is None else table.held(now)
        return counts

    async def aclose(self) -> None:
        self._tables.clear()
