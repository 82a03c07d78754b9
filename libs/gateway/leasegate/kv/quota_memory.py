"""The in-process quota store: the embedded mode's twin of the Redis one.

Await-free, so every call is atomic on the event loop. A quota is forgotten
`RETENTION_S` after it stops saying anything (its latest reset, else when it was observed),
as the Redis keys' TTLs forget them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leasegate.core.ports.quota import Quota

RETENTION_S = 120.0
"""How long a quota outlives its latest reset (or its observation)."""


class InProcessQuotaStore:
    def __init__(self) -> None:
        self._quotas: dict[tuple[str, str], Quota] = {}

    async def snapshot(
        self, pairs: Sequence[tuple[str, str]], now: float
    ) -> Mapping[tuple[str, str], Quota]:
        found: dict[tuple[str, str], Quota] = {}
        for pair in pairs:
            quota = self._quotas.get(pair)
            if quota is None:
                continue
            if quota.expires_at() + RETENTION_S <= now:
                del self._quotas[pair]
                continue
            found[pair] = quota
        return found

    async def learn(self, quotas: Sequence[Quota], now: float) -> None:
        for quota in quotas:
            pair = (quota.account_id, quota.model)
            held = self._quotas.get(pair)
            if held is None or held.observed_at <= quota.observed_at:
                self._quotas[pair] = quota

    async def aclose(self) -> None:
        self._quotas.clear()
