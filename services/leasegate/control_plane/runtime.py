"""Everything the control plane's handlers need, built once per process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from leasegate.accounts import Candidate, Registry
from leasegate.config import Settings
from leasegate.control_plane.mint_metrics import MintMetrics
from leasegate.control_plane.overlay import AdminOverlay
from leasegate.control_plane.usage import SpendToday
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.core.ports.revocation import Revocation
from leasegate.core.records import KeyRecord
from leasegate.db.audit import AuditRepository
from leasegate.routing.selection import AdminState, Facts
from leasegate.web.auth import TokenAuthority
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

    def __post_init__(self) -> None:
        self.overlay = AdminOverlay(
            AuditRepository(self.stores.database),
            self.stores.witness,
            self.settings.audit_key,
            self.clock,
        )

    async def facts(self, candidates: Sequence[Candidate]) -> Facts:
        """Live facts for selection: one health read, one lease count, the admin overlay."""
        now = self.clock.now()
        epoch = now.timestamp()
        pairs = [(c.account.id, c.served_model) for c in candidates]
        snapshot = await self.stores.health.snapshot(pairs, epoch)
        counted = [c.account.id for c in candidates if c.account.lease_capacity is not None]
        leases = await self.stores.store.live_lease_counts(counted, now) if counted else {}
        admin_states, admin_revision = await self.admin_view()
        return Facts(
            now=epoch,
            admin_states=admin_states,
            admin_revision=admin_revision,
            health=snapshot,
            leases_held=leases,
        )

    async def admin_view(self) -> tuple[dict[str, AdminState], int]:
        """The operators' overlay and the chain revision it was folded from; held
        (`account-state-unavailable`) while the chain is corrupt: an overlay nobody can verify
        never decides who may be selected. From the overlay's cached fold: the commit that
        follows re-checks the chain's revision under the lock."""
        verdict = await self.overlay.decided()
        if verdict.status == "corrupt":
            raise GatewayError("account-state-unavailable", "the admin audit chain does not verify")
        return dict(verdict.overlay), verdict.revision

    async def announce_revoked(self, keys: Sequence[KeyRecord]) -> None:
        """Tell every proxy replica, now, that these keys have ended."""
        await self.stores.revocations.publish(
            [Revocation(k.key_id, k.expires_at.timestamp()) for k in keys]
        )
