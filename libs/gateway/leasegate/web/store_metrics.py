"""Store call latency and errors as Prometheus metrics, labelled by store.

The database (`postgresql` or `sqlite`): SQLAlchemy's statements, one observation each, from
the engine's events, timed around the driver's execute (`leasegate.db.engine_timing`); and the
asyncpg pool's calls (mint, renewal, key reads, evidence batches, a proxy's audit chain reads),
one per lent connection's block (`leasegate.pg.pool`); pool wait excluded either way. Redis
(`redis`, a single server or a cluster): one per command or pipeline, timed by the client
itself (`leasegate.kv.redis_timed`, pool wait included). Embedded mode has no Redis, so no
series. Nothing here imports a driver: each store times itself and reports to a `_Calls`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from leasegate.core.ports.revocation import RevocationBus
from leasegate.kv.redis_client import RedisClient
from leasegate.kv.redis_timed import observe
from leasegate.web.wiring import ProxyDatabase, ProxyStores

_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self.seconds = Histogram(
            "leasegate_store_call_seconds",
            "Duration of one statement against the store.",
            ["store"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.errors = Counter(
            "leasegate_store_errors",
            "Statements against the store that raised.",
            ["store"],
            registry=registry,
        )

    def watch(self, stores: ProxyStores) -> None:
        """Time every call of the process's stores from now on."""
        self.watch_database(stores.durable)
        if stores.redis is not None:
            self.watch_redis(stores.redis)

    def watch_revocations(self, bus: RevocationBus) -> None:
        """A proxy's revocation subscription, read at scrape time: 1 while live (or while no
        connection is needed, in-process), 0 while down (revocations could be missed)."""
        up = Gauge(
            "leasegate_revocation_subscription_up",
            "1 while this proxy's revocation subscription is live, 0 while it is down.",
            registry=self._registry,
        )
        up.set_function(lambda: 1.0 if bus.ready else 0.0)

    def watch_redis(self, client: RedisClient) -> None:
        observe(client, self._calls("redis"))

    def watch_database(self, database: ProxyDatabase) -> None:
        database.observe(self._calls(database.dialect))  # sqlite or postgresql

    def _calls(self, store: str) -> _Calls:
        return _Calls(self.seconds.labels(store), self.errors.labels(store))


class _Calls:
    """A store's series, as `leasegate.core.ports.calls.CallObserver`."""

    __slots__ = ("_errors", "_seconds")

    def __init__(self, seconds: Histogram, errors: Counter) -> None:
        self._seconds = seconds
        self._errors = errors

    def succeeded(self, seconds: float) -> None:
        self._seconds.observe(seconds)

    def failed(self) -> None:
        self._errors.inc()
