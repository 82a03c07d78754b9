"""Build the stores a process needs from its configuration: in-process twins in embedded
mode, Redis-backed ones in production mode, and the database either way."""

from __future__ import annotations

from dataclasses import dataclass

from leasegate.config import Config
from leasegate.config.redis_url import is_cluster_url, parse_cluster_url
from leasegate.core.ports.capacity import RequestSlots
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.ports.health import HealthFanout, HealthPolicy, HealthStore
from leasegate.core.ports.revocation import RevocationBus
from leasegate.core.ports.spend import ChainSpend
from leasegate.core.ports.witness import AuditWitness
from leasegate.db.engine import Database
from leasegate.db.engine import Deadlines as DatabaseDeadlines
from leasegate.db.store import Store
from leasegate.kv.connect import Deadlines as RedisDeadlines
from leasegate.kv.connect import redis_client
from leasegate.kv.fanout_memory import InProcessHealthFanout, InProcessRevocationBus
from leasegate.kv.health_fanout_redis import RedisHealthFanout
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.kv.health_redis import RedisHealthStore
from leasegate.kv.redis_client import RedisClient, cluster_client
from leasegate.kv.redis_client import close as close_redis
from leasegate.kv.redis_client import ping as ping_redis
from leasegate.kv.revocations_redis import RedisRevocationBus
from leasegate.kv.slots_memory import InProcessRequestSlots
from leasegate.kv.slots_redis import RedisRequestSlots
from leasegate.kv.spend_memory import InProcessChainSpend
from leasegate.kv.spend_redis import RedisChainSpend
from leasegate.kv.witness_memory import InProcessAuditWitness
from leasegate.kv.witness_redis import RedisAuditWitness


@dataclass
class Stores:
    database: Database
    store: Store
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

    async def ping_database(self) -> None:
        """Raises StoreUnavailable unless the database answers (/readyz's probe)."""
        if not await self.database.ping():
            raise StoreUnavailable("no-answer")

    async def ping_redis(self) -> None:
        """Redis answers, and the revocation subscription (if this process has one) is live;
        raises StoreUnavailable otherwise (/readyz's probe)."""
        if self.redis is not None:
            await ping_redis(self.redis)
        if not self.revocations.ready:
            raise StoreUnavailable("subscription-down")

    async def aclose(self) -> None:
        await self.revocations.aclose()
        await self.health_fanout.aclose()
        await self.health.aclose()
        await self.slots.aclose()
        if self.redis is not None:
            await close_redis(self.redis)
        await self.database.dispose()


def health_policy(config: Config) -> HealthPolicy:
    s = config.settings
    return HealthPolicy(
        failure_threshold=s.failure_threshold,
        account_failure_threshold=s.account_failure_threshold,
        base_cooldown_s=s.base_cooldown_s,
        max_cooldown_s=s.max_cooldown_s,
        jitter=s.cooldown_jitter,
    )


def open_stores(config: Config) -> Stores:
    """Construct (without connecting: the first use connects) every store for this config."""
    settings = config.settings
    database = Database.connect(
        settings.database_url,
        DatabaseDeadlines(settings.database_connect_timeout_s, settings.database_command_timeout_s),
        settings.database_pool_size,
    )
    policy = health_policy(config)
    if settings.redis_url is None:
        return Stores(
            database=database,
            store=Store(database),
            health=InProcessHealthStore(policy),
            health_fanout=InProcessHealthFanout(),
            slots=InProcessRequestSlots(settings.request_slot_lease_s),
            revocations=InProcessRevocationBus(),
            redis=None,
            witness=InProcessAuditWitness(),
            spend=InProcessChainSpend(),
        )
    client = _redis_client(
        settings.redis_url,
        RedisDeadlines(settings.redis_connect_timeout_s, settings.redis_command_timeout_s),
    )
    prefix = settings.redis_prefix
    return Stores(
        database=database,
        store=Store(database),
        health=RedisHealthStore(client, prefix, policy),
        health_fanout=RedisHealthFanout(
            client, prefix, reply_within_s=settings.redis_command_timeout_s
        ),
        slots=RedisRequestSlots(client, prefix, settings.request_slot_lease_s),
        revocations=RedisRevocationBus(
            client, prefix, reply_within_s=settings.redis_command_timeout_s
        ),
        redis=client,
        witness=RedisAuditWitness(client, prefix),
        spend=RedisChainSpend(client, prefix),
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
