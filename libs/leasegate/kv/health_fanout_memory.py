"""Health news inside one process (embedded mode): delivery is a direct call."""

from __future__ import annotations

from collections.abc import Sequence

from leasegate.core.ports.health import HealthNews, OnHealthReset, OnNews


class InProcessHealthFanout:
    def __init__(self) -> None:
        self._subscribers: list[OnNews] = []

    @property
    def ready(self) -> bool:
        return True

    async def publish(self, news: Sequence[HealthNews]) -> None:
        for deliver in self._subscribers:
            deliver(news)

    async def subscribe(self, on_news: OnNews, on_reset: OnHealthReset) -> None:
        self._subscribers.append(on_news)
        on_reset()

    async def aclose(self) -> None:
        self._subscribers.clear()
