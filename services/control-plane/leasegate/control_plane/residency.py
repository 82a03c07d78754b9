"""A mint's data residency: the tenant's configured restriction, narrowed by the mint's own.

The mint's own restriction (`allowed_providers` / `allowed_regions`) is recorded on its
decision; a hop inherits its chain's (`hops`), as it inherits the budget. The tenant's comes
from LEASEGATE_TENANT_RESIDENCY on every mint. Selection passes over every account outside the
result with the static pass-over `residency` (`routing.selection`).
"""

from __future__ import annotations

from collections.abc import Mapping

from leasegate.config.settings import TenantResidency
from leasegate.control_plane.decision import Start
from leasegate.control_plane.deps import Limits
from leasegate.core.errors import GatewayError
from leasegate.routing.residency import UNRESTRICTED, Residency, narrowed


def _set(names: tuple[str, ...] | None) -> frozenset[str] | None:
    return frozenset(names) if names is not None else None


def residency_of(settings: Mapping[str, TenantResidency]) -> dict[str, Residency]:
    """The configured restrictions, by tenant."""
    return {
        tenant: Residency(_set(entry.allowed_providers), _set(entry.allowed_regions))
        for tenant, entry in settings.items()
    }


def mint_residency(limits: Limits, tenant: str, start: Start) -> Residency | GatewayError:
    """Where this mint may be served: the chain's own restriction within the tenant's, or the
    400 of one that reaches outside it."""
    asked = Residency(_set(start.allowed_providers), _set(start.allowed_regions))
    applied = narrowed(limits.tenant_residency.get(tenant, UNRESTRICTED), asked)
    if isinstance(applied, str):
        return GatewayError("invalid-request", applied)
    return applied
