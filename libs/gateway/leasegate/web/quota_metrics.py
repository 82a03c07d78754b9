"""Learned quota as a Prometheus gauge, read at scrape time (both services).

`leasegate_quota_remaining{account,model,dimension}`: what each limited bucket holds now,
modelled (buckets refill between answers), rounded down, from the shared quota store: every
replica reports what any proxy learned. A bucket nobody has heard of has no series; a store
that does not answer drops them all (unknown is not "full").
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Gauge

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.quota import QuotaStore
from leasegate.routing.quota import room_now

log = logging.getLogger("leasegate.quota")


class QuotaGauges:
    def __init__(
        self, metrics: CollectorRegistry, registry: Registry, store: QuotaStore, clock: Clock
    ) -> None:
        self._store = store
        self._clock = clock
        self._pairs = [
            (a.id, served) for a in registry.accounts for served in dict.fromkeys(a.models.values())
        ]
        self.remaining = Gauge(
            "leasegate_quota_remaining",
            "What the provider's rate-limit bucket holds now (requests or tokens), as learned "
            "from its answers' headers and 429s, refilled to now, rounded down.",
            ["account", "model", "dimension"],
            registry=metrics,
        )

    async def refresh(self) -> None:
        now = self._clock.now().timestamp()
        try:
            found = await self._store.snapshot(self._pairs, now)
        except StoreError as exc:
            log.warning("quota gauges not refreshed", extra={"error": exc.reason})
            self.remaining.clear()
            return
        self.remaining.clear()
        for (account_id, model), quota in found.items():
            for dimension, bucket in quota.buckets.items():
                if bucket.remaining is None:
                    continue
                held = room_now(bucket, quota.observed_at, now)
                if held is not None:
                    self.remaining.labels(account_id, model, dimension).set(held)
