"""The quota store as mints read it: each header-learned bucket carries the refill remembered
from the answers that could tell it (`routing.refills`), not only what its newest headers say
(a nearly full bucket's say little)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leasegate.control_plane.deps import QuotaSnapshots
from leasegate.core.ports.quota import Quota
from leasegate.routing.refills import RefillMemory
from leasegate.routing.selection import Pair


class RefillInformedQuotas:
    def __init__(self, store: QuotaSnapshots, memory: RefillMemory | None = None) -> None:
        self._store = store
        self._memory = memory or RefillMemory()

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> Mapping[Pair, Quota]:
        return self._memory.informed(await self._store.snapshot(pairs, now), now)
