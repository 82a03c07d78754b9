"""How a store reports each call it makes, for the store metrics
(`leasegate.web.store_metrics`): the Redis clients (`leasegate.kv.redis_timed`), the asyncpg
pool (`leasegate.pg.pool`) and SQLAlchemy's engine (`leasegate.db.engine_timing`) each
time their calls and hand them to one of these, without knowing about Prometheus."""

from __future__ import annotations

from typing import Protocol


class CallObserver(Protocol):
    def succeeded(self, seconds: float) -> None:
        """A call completed in `seconds`."""

    def failed(self) -> None:
        """A call raised a store error (refused, timed out, an error reply)."""
