"""Revocation fan-out: every proxy replica learns at once that a key has ended."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from leasegate.core.ports.fanout import FanoutTrust


@dataclass(frozen=True, slots=True)
class Revocation:
    key_id: str
    expires_at: float
    """Epoch seconds; after this the key is refused as expired anyway, so it can be forgotten."""


OnRevoked = Callable[[Sequence[Revocation]], None]
OnReset = Callable[[], None]
"""Called when the subscription (re)connects: messages may have been missed, drop caches."""


class RevocationBus(FanoutTrust, Protocol):
    async def publish(self, revocations: Sequence[Revocation]) -> None: ...

    @property
    def ready(self) -> bool:
        """False while a wanted subscription is not live (revocations could be missed)."""

    async def subscribe(self, on_revoked: OnRevoked, on_reset: OnReset) -> None:
        """Start delivering, in the background if the bus needs a connection (`ready` then
        says when it is live); never waits for a store to answer."""

    async def aclose(self) -> None: ...
