"""The console's open sessions inside one process (embedded mode): a restart forgets them,
so it signs everyone out, whatever `LEASEGATE_CONSOLE_SECRET` says. Production mode keeps
them in Redis (`leasegate.kv.sessions_redis`)."""

from __future__ import annotations

from collections.abc import Collection


class InProcessConsoleSessions:
    def __init__(self) -> None:
        self._open: dict[tuple[str, str], float] = {}

    async def open(self, credential: str, session_id: str, expires_at: float, now: float) -> None:
        self._open = {k: until for k, until in self._open.items() if until > now}
        self._open[(credential, session_id)] = expires_at

    async def is_open(self, credential: str, session_id: str, now: float) -> bool:
        return self._open.get((credential, session_id), 0.0) > now

    async def close(self, credential: str, session_id: str) -> None:
        self._open.pop((credential, session_id), None)

    async def retire(self, keep: Collection[str], now: float) -> int:
        live = {k: until for k, until in self._open.items() if until > now}
        self._open = {k: until for k, until in live.items() if k[0] in keep}
        return len(live) - len(self._open)
