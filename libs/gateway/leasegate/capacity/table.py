"""The reservation table: holder-keyed slots under a ceiling, each on a renewable lease.

One table counts one account's slots. A holder (a request id, a key id) is the *key* of the
table, so exactly-once release is a property of the data structure, not of call sites:

- A slot exists only as the table entry for its holder. Reserving a holder that is already
  there renews its lease and takes no second slot.
- `release` removes the entry; only the call that actually removed it returns True. However
  many paths race to end one holder (the response finished, the client went away, shutdown),
  one slot comes back, once. A holder that never reserved returns nothing.
- A holder whose lease ran out (its process died and stopped renewing) is no longer counted and
  is dropped on the next write. Its late `release` then finds nothing, so the slot is still
  returned once: by the expiry, not by the release.

Liveness is `expiry > now`; the Redis twin uses the same rule (ZCOUNT over `(now, +inf)`).
"""

from __future__ import annotations

from collections.abc import Iterable


class ReservationTable:
    """Holders -> lease expiry (epoch seconds). Pure: every time is passed in."""

    __slots__ = ("_expiry",)

    def __init__(self) -> None:
        self._expiry: dict[str, float] = {}

    def reserve(self, holder: str, capacity: int, now: float, lease_s: float) -> bool:
        """Take a slot for `holder` until `now + lease_s`, or renew the one it has.

        False when the table is at `capacity` and `holder` holds nothing; the table is then
        unchanged apart from dropping expired holders.
        """
        self._drop_expired(now)
        if holder not in self._expiry and len(self._expiry) >= capacity:
            return False
        self._expiry[holder] = now + lease_s
        return True

    def release(self, holder: str) -> bool:
        """True only for the call that removed `holder`; every other call changes nothing."""
        return self._expiry.pop(holder, None) is not None

    def renew(self, holders: Iterable[str], now: float, lease_s: float) -> None:
        """Extend the leases of those `holders` still live; never revives or adds one."""
        self._drop_expired(now)
        expiry = now + lease_s
        for holder in holders:
            if holder in self._expiry:
                self._expiry[holder] = expiry

    def held(self, now: float) -> int:
        """How many holders are live at `now` (expired ones are dropped here too)."""
        self._drop_expired(now)
        return len(self._expiry)

    def holds(self, holder: str, now: float) -> bool:
        expiry = self._expiry.get(holder)
        return expiry is not None and expiry > now

    def _drop_expired(self, now: float) -> None:
        expired = [holder for holder, expiry in self._expiry.items() if expiry <= now]
        for holder in expired:
            del self._expiry[holder]
