"""Revocation fan-out inside one process (embedded mode): delivery is a direct call."""

from __future__ import annotations

from collections.abc import Sequence

from leasegate.core.ports.revocation import OnReset, OnRevoked, Revocation


class InProcessRevocationBus:
    def __init__(self) -> None:
        self._subscribers: list[OnRevoked] = []

    @property
    def ready(self) -> bool:
        return True

    async def publish(self, revocations: Sequence[Revocation]) -> None:
        for deliver in self._subscribers:
            deliver(revocations)

    async def subscribe(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        self._subscribers.append(on_revoked)
        on_reset()

    async def aclose(self) -> None:
        self._subscribers.clear()
