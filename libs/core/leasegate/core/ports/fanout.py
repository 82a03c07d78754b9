"""What a request asks of a fan-out before it relies on what the fan-out has delivered (the
revocation bus, the health news): one concept, shared by both."""

from __future__ import annotations

from typing import Protocol


class FanoutTrust(Protocol):
    def trusted(self) -> bool:
        """Live and known to be delivering now (heard from within its silence bound): what it
        delivered is all there is. Asked on the request path; it may send a heartbeat."""

    async def confirmed(self) -> bool:
        """`trusted()`, or, when live but not heard from lately, trusted once the heartbeat
        that asking sent is answered (bounded; one answer shared by every caller waiting).
        Callers ask `trusted()` first: this is for the moment it says no."""
