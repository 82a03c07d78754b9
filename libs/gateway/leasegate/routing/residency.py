"""Data residency: which providers and regions a tenant's dispatches may be served from.

A `Residency` is a static filter (selection's `residency` pass-over): an account is allowed
when its kind is among `providers` (if any are named) and its region among `regions` (if any
are named). An account without a region (the direct APIs) never satisfies `regions`.

The operator's per-tenant restriction (LEASEGATE_TENANT_RESIDENCY) bounds what a mint may ask:
a mint's own restriction only narrows it (`narrowed`). Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Residency:
    providers: frozenset[str] | None = None
    """Provider kinds allowed; None: any."""
    regions: frozenset[str] | None = None
    """Regions allowed; None: any (including none)."""

    def allows(self, provider: str, region: str | None) -> bool:
        if self.providers is not None and provider not in self.providers:
            return False
        return self.regions is None or (region is not None and region in self.regions)

    @property
    def unrestricted(self) -> bool:
        return self.providers is None and self.regions is None


UNRESTRICTED = Residency()


def _narrows(inner: frozenset[str] | None, outer: frozenset[str] | None) -> bool:
    """Whether a mint's names lie within the tenant's (naming none keeps the tenant's)."""
    return inner is None or outer is None or inner <= outer


def narrowed(tenant: Residency, asked: Residency) -> Residency | str:
    """The restriction a mint applies: the mint's own where it names one, which must lie
    within the tenant's; else the problem (a 400's message)."""
    if not _narrows(asked.providers, tenant.providers):
        return "allowed_providers must lie within the tenant's configured allowed providers"
    if not _narrows(asked.regions, tenant.regions):
        return "allowed_regions must lie within the tenant's configured allowed regions"
    return Residency(
        asked.providers if asked.providers is not None else tenant.providers,
        asked.regions if asked.regions is not None else tenant.regions,
    )
