"""The control plane's composition root: every collaborator, built once per process from the
settings, the registry and the stores, and each router's own dependency object
(`routes.ControlDeps`, the console's `console.deps.ConsoleDeps`) built from them. Only this
module and `app` reach the concrete stores (`leasegate.db`, the `Stores` of
`leasegate.web.wiring`); everything else is handed ports."""

from __future__ import annotations

from dataclasses import dataclass, field

from leasegate.accounts import Registry
from leasegate.config import Settings
from leasegate.control_plane.accounts import AccountsDeps
from leasegate.control_plane.admin import AdminDeps
from leasegate.control_plane.callers import Callers
from leasegate.control_plane.console.deps import ConsoleDeps, SessionDeps
from leasegate.control_plane.deps import Limits, MintDeps
from leasegate.control_plane.lease_rates import LeaseRateMeter
from leasegate.control_plane.mint_metrics import MintMetrics
from leasegate.control_plane.overlay import AdminOverlay
from leasegate.control_plane.refills import RefillInformedQuotas
from leasegate.control_plane.residency import residency_of
from leasegate.control_plane.routes import ControlDeps
from leasegate.control_plane.spend_reconcile import SpendReconciler
from leasegate.control_plane.spend_today import TodaysSpend
from leasegate.control_plane.stores import Stores
from leasegate.control_plane.tenant_views import TenantReads
from leasegate.control_plane.tenants import TenantDeps
from leasegate.control_plane.throttle import FailedAuthThrottle
from leasegate.control_plane.usage import UsageDeps
from leasegate.core.clock import Clock
from leasegate.db.audit import AuditRepository
from leasegate.db.browse import BrowseRepository
from leasegate.routing.lease_ceiling import LeaseRate, default_prior
from leasegate.web.auth import TokenAuthority
from leasegate.web.spend_totals import SpendTotals, settle_seconds


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
    reconciler: SpendReconciler = field(init=False)
    """Brings the totals back to evidence; started by the app's lifespan."""
    lease_rates: LeaseRateMeter = field(init=False)
    """What a live lease spends per second, measured in the background (adaptive ceilings)."""
    accounts: AccountsDeps = field(init=False)
    """The accounts view's and the capacity gauges' reads."""
    tenant_reads: TenantReads = field(init=False)
    """The tenant views' and the budget gauge's reads."""
    routes: ControlDeps = field(init=False)
    """What `routes.control_router` is built from."""
    console: ConsoleDeps = field(init=False)
    """What the console's pages are built from (`console.routes.install_console`)."""

    def __post_init__(self) -> None:
        store = self.stores.store
        prior = default_prior(self.settings.lease_prior_requests_per_s)
        self.lease_rates = LeaseRateMeter(
            store,
            [a.id for a in self.registry.accounts],
            self.clock,
            every_s=self.settings.lease_rate_interval_s,
            settle_s=settle_seconds(self.settings.evidence_written_within_s),
            prior=prior,
        )
        self.overlay = AdminOverlay(
            AuditRepository(self.stores.database),
            self.stores.witness,
            self.settings.audit_key,
            self.clock,
        )
        # each account's usage since midnight, for the accounts view
        spend_today = TodaysSpend(store, self.clock)
        # running spend totals, rebuilt from evidence when the spend store lost them
        totals = SpendTotals(
            self.stores.spend,
            store,
            self.registry,
            self.clock,
            settle_seconds(self.settings.evidence_written_within_s),
        )
        self.reconciler = SpendReconciler(
            self.overlay,
            totals,
            store,
            self.clock,
            every_s=self.settings.spend_reconcile_interval_s,
            chain_keep_s=self.settings.key_max_ttl_s,
        )
        # the collaborators of mint, hops, renewal and revocation (`deps.py`)
        services = self._mint_deps(prior, totals)
        # wrong tokens per client address: the console's sign-in and the API's bearer tokens
        callers = Callers(self.auth, FailedAuthThrottle(), self.clock)
        self.accounts = AccountsDeps(
            registry=self.registry,
            clock=self.clock,
            health=self.stores.health,
            quota=self.stores.quota,
            leases=store,
            slots=self.stores.slots,
            overlay=self.overlay,
            spend_today=spend_today,
        )
        self.tenant_reads = TenantReads(self.overlay, totals, self.clock, self.registry.currency)
        admin = AdminDeps(
            callers, self.overlay, self.registry, self.stores.revocations, self.accounts
        )
        tenants = TenantDeps(callers, self.overlay, self.reconciler, self.tenant_reads)
        self.routes = ControlDeps(
            callers=callers,
            mint=services,
            mint_metrics=self.mint_metrics,
            records=store,
            accounts=self.accounts,
            admin=admin,
            usage=UsageDeps(store, self.clock, self.registry.currency),
            tenants=tenants,
        )
        self.console = self._console_deps(
            SessionDeps(
                callers=callers,
                open_sessions=self.stores.console_sessions,
                secret=self.settings.console_secret,
                ttl_s=float(self.settings.console_session_ttl_s),
            ),
            admin,
            tenants,
            services,
        )

    def _console_deps(
        self, sessions: SessionDeps, admin: AdminDeps, tenants: TenantDeps, services: MintDeps
    ) -> ConsoleDeps:
        return ConsoleDeps(
            sessions=sessions,
            clock=self.clock,
            registry=self.registry,
            accounts=self.accounts,
            overlay=self.overlay,
            admin=admin,
            tenants=tenants,
            usage=self.stores.store,
            records=self.stores.store,
            browse=BrowseRepository(self.stores.database),
            witness=self.stores.witness,
            revoker=services,
        )

    def _mint_deps(self, prior: LeaseRate, totals: SpendTotals) -> MintDeps:
        settings = self.settings
        return MintDeps(
            clock=self.clock,
            store=self.stores.store,
            health=self.stores.health,
            overlay=self.overlay,
            registry=self.registry,
            revocations=self.stores.revocations,
            limits=Limits(
                key_ttl_s=settings.key_ttl_s,
                key_max_ttl_s=settings.key_max_ttl_s,
                max_fallback_hops=settings.max_fallback_hops,
                affinity_ttl_s=settings.affinity_ttl_s,
                fair_share_window_s=settings.fair_share_window_s,
                spend_window_s=settings.lease_rate_interval_s,
                tenant_shares=settings.tenant_shares,
                tenant_residency=residency_of(settings.tenant_residency),
                lease_prior=prior,
                lease_probe=settings.lease_probe_leases,
                lease_spread=settings.lease_spread_share,
            ),
            spend=totals,
            quota=None if self.stores.quota is None else RefillInformedQuotas(self.stores.quota),
            lease_rates=self.lease_rates,
        )
