"""Everything the control plane's handlers need, built once per process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from leasegate.accounts import Registry
from leasegate.config import Settings
from leasegate.control_plane.deps import Limits, MintDeps, announce_revoked
from leasegate.control_plane.lease_rates import LeaseRateMeter
from leasegate.control_plane.mint_metrics import MintMetrics
from leasegate.control_plane.overlay import AdminOverlay
from leasegate.control_plane.residency import residency_of
from leasegate.control_plane.spend_reconcile import SpendReconciler
from leasegate.control_plane.throttle import FailedAuthThrottle
from leasegate.control_plane.usage import SpendToday
from leasegate.core.clock import Clock
from leasegate.core.records import KeyRecord
from leasegate.db.audit import AuditRepository
from leasegate.routing.lease_ceiling import default_prior
from leasegate.web.auth import TokenAuthority
from leasegate.web.spend_totals import SpendTotals, settle_seconds
from leasegate.web.wiring import Stores


@dataclass
class ControlRuntime:
    settings: Settings
    registry: Registry
    clock: Clock
    stores: Stores
    auth: TokenAuthority
    mint_metrics: MintMetrics
    overlay: AdminOverlay = field(init=False)
    """The operators' account states, folded from the audit chain."""
    spend_today: SpendToday = field(init=False, default_factory=SpendToday)
    """Each account's usage since midnight, for the accounts view."""
    totals: SpendTotals = field(init=False)
    """Running spend totals, rebuilt from evidence when the spend store lost them."""
    reconciler: SpendReconciler = field(init=False)
    """Brings the totals back to evidence; started by the app's lifespan."""
    services: MintDeps = field(init=False)
    """The collaborators of mint, hops, renewal and revocation (`deps.py`)."""
    lease_rates: LeaseRateMeter = field(init=False)
    """What a live lease spends per second, measured in the background (adaptive ceilings)."""
    failed_auth: FailedAuthThrottle = field(init=False, default_factory=FailedAuthThrottle)
    """Wrong tokens per client address: the console's sign-in and the API's bearer tokens."""

    def __post_init__(self) -> None:
        self.lease_rates = LeaseRateMeter(
            self.stores.store,
            [a.id for a in self.registry.accounts],
            self.clock,
            every_s=self.settings.lease_rate_interval_s,
            prior=default_prior(self.settings.lease_prior_requests_per_s),
        )
        self.overlay = AdminOverlay(
            AuditRepository(self.stores.database),
            self.stores.witness,
            self.settings.audit_key,
            self.clock,
        )
        self.totals = SpendTotals(
            self.stores.spend,
            self.stores.store,
            self.registry,
            self.clock,
            settle_seconds(self.settings.evidence_flush_interval_s),
        )
        self.reconciler = SpendReconciler(
            self.overlay,
            self.totals,
            self.stores.store,
            self.clock,
            every_s=self.settings.spend_reconcile_interval_s,
            chain_keep_s=self.settings.key_max_ttl_s,
        )
        self.services = MintDeps(
            clock=self.clock,
            store=self.stores.store,
            health=self.stores.health,
            overlay=self.overlay,
            registry=self.registry,
            revocations=self.stores.revocations,
            limits=Limits(
                key_ttl_s=self.settings.key_ttl_s,
                key_max_ttl_s=self.settings.key_max_ttl_s,
                max_fallback_hops=self.settings.max_fallback_hops,
                affinity_ttl_s=self.settings.affinity_ttl_s,
                fair_share_window_s=self.settings.fair_share_window_s,
                tenant_shares=self.settings.tenant_shares,
                tenant_residency=residency_of(self.settings.tenant_residency),
                lease_prior_requests_per_s=self.settings.lease_prior_requests_per_s,
                lease_probe=self.settings.lease_probe_leases,
                lease_spread=self.settings.lease_spread_share,
            ),
            spend=self.totals,
            quota=self.stores.quota,
            lease_rates=self.lease_rates,
        )

    async def announce_revoked(self, keys: Sequence[KeyRecord]) -> None:
        """Tell every proxy replica, now, that these keys have ended."""
        await announce_revoked(self.services, keys)
