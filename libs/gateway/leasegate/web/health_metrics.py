"""Health as Prometheus gauges, read from the health store at scrape time (both services).

Cooldowns and circuits end by time alone, with no event to hook, so a gauge kept up to date
by the code that trips them would stay at 1 after expiry. Reading the store on every scrape
(one snapshot: one Redis round trip for the whole registry) keeps the gauges exactly as true
as the accounts view, and every replica reports the shared state, not only what it saw.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Gauge

from leasegate.accounts import Registry
from leasegate.core.clock import Clock
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import HealthStore

log = logging.getLogger("leasegate.health")


class HealthGauges:
    def __init__(
        self, metrics: CollectorRegistry, registry: Registry, health: HealthStore, clock: Clock
    ) -> None:
        self._health = health
        self._clock = clock
        self._accounts = [a.id for a in registry.accounts]
        self._pairs = [
            (a.id, served) for a in registry.accounts for served in dict.fromkeys(a.models.values())
        ]
        self.cooling = Gauge(
            "leasegate_model_cooling",
            "1 while the account is cooling down for this served model, else 0.",
            ["account", "model"],
            registry=metrics,
        )
        self.circuit = Gauge(
            "leasegate_account_circuit_open",
            "1 while the account's circuit is open (every model refused), else 0.",
            ["account"],
            registry=metrics,
        )

    async def refresh(self) -> None:
        """Set every (account, served model) and every account from one store snapshot."""
        try:
            snapshot = await self._health.snapshot(self._pairs, self._clock.now().timestamp())
        except StoreError as exc:
            # Unknown is not healthy: drop the series rather than report stale values.
            log.warning("health gauges not refreshed", extra={"error": exc.reason})
            self.cooling.clear()
            self.circuit.clear()
            return
        for account_id, model in self._pairs:
            cooling = snapshot.cooling_for(account_id, model) is not None
            self.cooling.labels(account_id, model).set(1 if cooling else 0)
        for account_id in self._accounts:
            self.circuit.labels(account_id).set(1 if snapshot.circuit(account_id) else 0)
