"""What the proxy needs from a request-slot store. Implemented in leasegate.kv (in-process, Redis).

Every method follows leasegate.capacity.table.ReservationTable: slots are keyed on a holder (the
request id), each on a lease of `lease_s` seconds that the holder's process keeps renewing. A
holder is live while its expiry is after `now`; `now` is epoch seconds, passed in so that tests
control time (every process's clock is assumed to agree to well under `lease_s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RequestSlots(Protocol):
    @property
    def lease_s(self) -> float:
        """How long a slot outlives its holder's last acquire or renew."""

    async def acquire(self, account_id: str, holder: str, capacity: int, now: float) -> bool:
        """Take one slot for `holder` on the account, or renew the one it already has.

        False when `capacity` live holders are there and `holder` is not one of them: the
        caller answers 429 at once, nothing waits. Atomic across every process sharing the
        store. Raises StoreUnavailable (`leasegate.core.ports.errors`) when the store cannot
        answer.
        """

    async def release(self, account_id: str, holders: Sequence[str]) -> int:
        """Return the `holders`' slots on the account, in one round trip; how many this call
        removed (each is counted by one call only).

        Releasing twice, or a holder that never reserved, is harmless and not counted.
        Raises StoreUnavailable when the store cannot answer (the lease then reclaims the slot).
        """

    async def renew(self, account_id: str, holders: Sequence[str], now: float) -> None:
        """Push the leases of the still-live `holders` to `now + lease_s`, in one round trip.

        Never revives an expired holder nor adds an unknown one.
        """

    async def in_flight(self, account_ids: Sequence[str], now: float) -> dict[str, int]:
        """Live holders per account, every account named (0 when none), in one round trip."""

    async def aclose(self) -> None:
        """Free what the store owns; slots held in a shared store stay until released or expired."""
