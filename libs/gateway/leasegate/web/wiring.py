"""The stores both deployables share, built from the configuration: in-process twins in
embedded mode, Redis-backed ones in production mode (`open_kv`), and what a proxy asks of the
database (`ProxyDatabase`). Each deployable composes its own from these: the proxy in
`leasegate.proxy.stores` (plain asyncpg on Postgres, so it never imports SQLAlchemy), the
control plane and the embedded mode in `leasegate.control_plane.stores` (SQLAlchemy's
`Database` and `Store` too).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

from leasegate.audit.reads import ChainReader
from leasegate.config import Config, Settings
from leasegate.config.redis_url import is_cluster_url, parse_cluster_url
from leasegate.core.ports.calls import CallObserver
from leasegate.core.ports.capacity import RequestSlots
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.ports.health import HealthFanout, HealthPolicy, HealthStore
from leasegate.core.ports.quota import QuotaStore
from leasegate.core.ports.revocation import RevocationBus
from leasegate.core.ports.spend import ChainSpend, SpendEvidence
from leasegate.core.ports.storage import EvidenceWriter, KeyReader
from leasegate.core.ports.witness import AuditWitness
from leasegate.kv.buses_redis import redis_buses
from leasegate.kv.connect import Deadlines as RedisDeadlines
from leasegate.kv.connect import redis_client
from leasegate.kv.fanout_memory import InProcessHealthFanout, InProcessRevocationBus
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.kv.health_redis import RedisHealthStore
from leasegate.kv.quota_memory import InProcessQuotaStore
from leasegate.kv.quota_redis import RedisQuotaStore
from leasegate.kv.redis_client import RedisClient, cluster_client
from leasegate.kv.redis_client import close as close_redis
from leasegate.kv.redis_client import ping as ping_redis
from leasegate.kv.slots_memory import InProcessRequestSlots
from leasegate.kv.slots_redis import RedisRequestSlots
from leasegate.kv.spend_memory import InProcessChainSpend
from leasegate.kv.spend_redis import RedisChainSpend
from leasegate.kv.witness_memory import InProcessAuditWitness
from leasegate.kv.witness_redis import RedisAuditWitness
from leasegate.pg.pool import Deadlines as DatabaseDeadlines


class ProxyDatabase(KeyReader, EvidenceWriter, ChainReader, SpendEvidence, Protocol):
    """Everything a proxy asks of the database (`PgProxyStore`, or `SqlProxyStore`)."""

    dialect: str
    """`postgresql` or `sqlite`: the store metrics' label."""

    async def ping(self) -> bool:
        """Whether the database answers within a couple of seconds."""

    async def schema_revisions(self) -> frozenset[str]:
        """The Alembic revisions the database is at (none: unmigrated); StoreError when it
        cannot be reached."""

    def observe(self, calls: CallObserver) -> None:
        """Time every call from now on."""

    async def close(self) -> None: ...


@dataclass
class KvStores:
    """The stores outside the database: in-process (embedded) or on Redis (production)."""

    health: HealthStore
    health_fanout: HealthFanout
    """Health news between proxies (each proxy's local view, proxy/health_view.py)."""
    slots: RequestSlots
    revocations: RevocationBus
    redis: RedisClient | None
    witness: AuditWitness
    """The audit chain's high-water mark, outside the database."""
    spend: ChainSpend
    """Each dispatch chain's running tokens and cost, for its budget."""
    quota: QuotaStore
    """Each (account, served model)'s learned quota (proxy/quota_view.py, the accounts view)."""

    def parts(self) -> dict[str, Any]:
        """This object's fields, to build a `ProxyStores` or `Stores` around them."""
        return {f.name: getattr(self, f.name) for f in fields(KvStores)}

    async def ping_redis(self) -> None:
        """Redis answers, and the revocation subscription (if this process has one) is live;
        raises StoreUnavailable otherwise (/readyz's probe)."""
        if self.redis is not None:
            await ping_redis(self.redis)
        if not self.revocations.ready:
            raise StoreUnavailable("subscription-down")

    async def _close_kv(self) -> None:
        await self.revocations.aclose()
        await self.health_fanout.aclose()
        await self.health.aclose()
        await self.quota.aclose()
        await self.slots.aclose()
        if self.redis is not None:
            await close_redis(self.redis)


@dataclass
class ProxyStores(KvStores):
    """What a proxy needs."""

    durable: ProxyDatabase

    async def ping_database(self) -> None:
        """Raises StoreUnavailable unless the database answers (/readyz's probe)."""
        if not await self.durable.ping():
            raise StoreUnavailable("no-answer")

    async def aclose(self) -> None:
        await self._close_kv()
        await self.durable.close()


def health_policy(config: Config) -> HealthPolicy:
    s = config.settings
    return HealthPolicy(
        failure_threshold=s.failure_threshold,
        account_failure_threshold=s.account_failure_threshold,
        base_cooldown_s=s.base_cooldown_s,
        max_cooldown_s=s.max_cooldown_s,
        jitter=s.cooldown_jitter,
        overload_cooldown_s=s.overload_cooldown_s,
    )


def database_deadlines(settings: Settings) -> DatabaseDeadlines:
    return DatabaseDeadlines(
        settings.database_connect_timeout_s, settings.database_command_timeout_s
    )


def open_kv(config: Config) -> KvStores:
    """The stores outside the database, for this config (not connected yet)."""
    settings = config.settings
    policy = health_policy(config)
    if settings.redis_url is None:
        return KvStores(
            health=InProcessHealthStore(policy),
            health_fanout=InProcessHealthFanout(),
            slots=InProcessRequestSlots(settings.request_slot_lease_s),
            revocations=InProcessRevocationBus(),
            redis=None,
            witness=InProcessAuditWitness(),
            spend=InProcessChainSpend(),
            quota=InProcessQuotaStore(),
        )
    client = _redis_client(
        settings.redis_url,
        RedisDeadlines(settings.redis_connect_timeout_s, settings.redis_command_timeout_s),
    )
    prefix = settings.redis_prefix
    revocations, health_news = redis_buses(
        client,
        prefix,
        reply_within_s=settings.redis_command_timeout_s,
        heartbeat_s=settings.subscription_heartbeat_s,
    )
    return KvStores(
        health=RedisHealthStore(client, prefix, policy),
        health_fanout=health_news,
        slots=RedisRequestSlots(client, prefix, settings.request_slot_lease_s),
        revocations=revocations,
        redis=client,
        witness=RedisAuditWitness(client, prefix),
        spend=RedisChainSpend(client, prefix),
        quota=RedisQuotaStore(client, prefix),
    )


def _redis_client(url: str, deadlines: RedisDeadlines) -> RedisClient:
    if is_cluster_url(url):
        cluster = parse_cluster_url(url)
        return cluster_client(
            cluster.nodes,
            tls=cluster.tls,
            username=cluster.username,
            password=cluster.password,
            deadlines=deadlines,
        )
    return redis_client(url, deadlines)
