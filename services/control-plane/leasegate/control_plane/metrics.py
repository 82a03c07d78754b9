"""The control plane's capacity gauges, read fresh from the shared stores on every scrape.

Both counts live outside the process (leases are key rows in the database, request slots are
in Redis), so every control-plane replica reports the same numbers and none keeps a counter
that could drift. Accounts without a request ceiling have no `requests_in_flight` series: the
proxy does not count them.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Gauge

from leasegate.control_plane.accounts import AccountsDeps, requests_in_flight
from leasegate.core.errors import GatewayError
from leasegate.core.ports.errors import StoreError, failure_reason

log = logging.getLogger("leasegate.control_plane.metrics")

# An unreachable database (a StoreError) or slot store (`unavailable`, a GatewayError).
_READ_ERRORS: tuple[type[Exception], ...] = (GatewayError, StoreError)


class CapacityGauges:
    def __init__(self, deps: AccountsDeps, registry: CollectorRegistry) -> None:
        self._deps = deps
        self.leases_held = Gauge(
            "leasegate_account_leases_held",
            "Live keys (leases) per account.",
            ["account"],
            registry=registry,
        )
        self.requests_in_flight = Gauge(
            "leasegate_account_requests_in_flight",
            "Request slots held per account (accounts with a request ceiling only).",
            ["account"],
            registry=registry,
        )
        lease_capacity = Gauge(
            "leasegate_account_lease_capacity",
            "The account's lease ceiling (absent when it has none).",
            ["account"],
            registry=registry,
        )
        request_capacity = Gauge(
            "leasegate_account_request_capacity",
            "The account's request ceiling (absent when it has none).",
            ["account"],
            registry=registry,
        )
        # The ceilings come from the accounts file and only change with a restart.
        for account in deps.registry.accounts:
            if account.lease_capacity is not None:
                lease_capacity.labels(account.id).set(account.lease_capacity)
            if account.request_capacity is not None:
                request_capacity.labels(account.id).set(account.request_capacity)

    async def refresh(self) -> None:
        """Bring both counts up to date; on a store outage drop them rather than show stale."""
        deps = self._deps
        accounts = deps.registry.accounts
        now = deps.clock.now()
        try:
            leases = await deps.leases.live_lease_counts([a.id for a in accounts], now)
            in_flight = await requests_in_flight(deps.slots, accounts, now.timestamp())
        except _READ_ERRORS as exc:
            log.warning("capacity gauges not refreshed", extra={"error": failure_reason(exc)})
            self.leases_held.clear()
            self.requests_in_flight.clear()
            return
        for account_id, held in leases.items():
            self.leases_held.labels(account_id).set(held)
        for account_id, count in in_flight.items():
            self.requests_in_flight.labels(account_id).set(count)
