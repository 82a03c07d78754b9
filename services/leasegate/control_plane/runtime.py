"""Everything the control plane's handlers need, built once per process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leasegate.accounts import Candidate, Registry
from leasegate.config import Settings
from leasegate.core.clock import Clock
from leasegate.core.ports.revocation import Revocation
from leasegate.core.records import KeyRecord
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

    async def facts(self, candidates: Sequence[Candidate]) -> Facts:
        """Live facts for selection: one health read, one lease count, the admin overlay."""
        now = self.clock.now()
        epoch = now.timestamp()
        pairs = [(c.account.id, c.served_model) for c in candidates]
        snapshot = await self.stores.health.snapshot(pairs, epoch)
        counted = [c.account.id for c in candidates if c.account.lease_capacity is not None]
        leases = await self.stores.store.live_lease_counts(counted, now) if counted else {}
        return Facts(
            now=epoch,
            admin_states=await self.admin_states(),
            circuits={a: c.until for a, c in snapshot.circuits.items()},
            cooling={pair: c.until for pair, c in snapshot.cooling.items()},
            leases_held=leases,
        )

    async def admin_states(self) -> dict[str, AdminState]:
        """The operators' overlay. Until the audit chain exists every account is enabled."""
        return {}

    async def announce_revoked(self, keys: Sequence[KeyRecord]) -> None:
        """Tell every proxy replica, now, that these keys have ended."""
        await self.stores.revocations.publish(
            [Revocation(k.key_id, k.expires_at.timestamp()) for k in keys]
        )
