"""Fan-out inside one process (embedded mode): delivery to every subscriber is a direct call.

One class serves both buses the proxies share in production: health news
(`core.ports.health.HealthFanout`) and revocations (`core.ports.revocation.RevocationBus`).
A subscriber is told to reset once, at once: nothing can have been missed before it joined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from leasegate.core.ports.health import HealthNews
from leasegate.core.ports.quota import OnQuotaNews, Quota
from leasegate.core.ports.revocation import Revocation

Message = TypeVar("Message")


class InProcessFanout(Generic[Message]):
    def __init__(self) -> None:
        self._subscribers: list[Callable[[Sequence[Message]], None]] = []

    @property
    def ready(self) -> bool:
        return True

    def trusted(self) -> bool:
        return True

    async def confirmed(self) -> bool:
        return True

    async def publish(self, messages: Sequence[Message]) -> None:
        for deliver in self._subscribers:
            deliver(messages)

    async def subscribe(
        self, on_messages: Callable[[Sequence[Message]], None], on_reset: Callable[[], None]
    ) -> None:
        self._subscribers.append(on_messages)
        on_reset()

    async def aclose(self) -> None:
        self._subscribers.clear()


class InProcessHealthFanout(InProcessFanout[HealthNews]):
    """Health news between the proxy and the control plane of one process, and quota news
    (to the quota views of the process: tests stand two proxies up on one)."""

    def __init__(self) -> None:
        super().__init__()
        self._quota_listeners: list[OnQuotaNews] = []

    async def publish_quota(self, quotas: Sequence[Quota]) -> None:
        for deliver in self._quota_listeners:
            deliver(quotas)

    def on_quota(self, deliver: OnQuotaNews) -> None:
        self._quota_listeners.append(deliver)

    async def aclose(self) -> None:
        await super().aclose()
        self._quota_listeners.clear()


class InProcessRevocationBus(InProcessFanout[Revocation]):
    """Revocations from the control plane to the proxy of one process."""
