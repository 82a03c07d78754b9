"""The accounts view: registry order, configuration, health, and both capacity counts.

`requests_in_flight` is null for an account without a request ceiling: the proxy counts
nothing on the hot path for it, so there is no true number to report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from leasegate.accounts import Account, Registry
from leasegate.control_plane.deps import HealthSnapshots, OverlayReads, QuotaSnapshots
from leasegate.control_plane.spend_today import TodaysSpend
from leasegate.core.clock import Clock, from_epoch
from leasegate.core.errors import GatewayError
from leasegate.core.ports.capacity import RequestSlots
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import HealthSnapshot
from leasegate.core.ports.quota import Quota
from leasegate.core.ports.storage import LeaseCounts
from leasegate.core.ports.usage import UsageGroup
from leasegate.routing.health import account_health
from leasegate.routing.quota import declared_quota, room_now
from leasegate.wire import Account as AccountView
from leasegate.wire import (
    AccountRead,
    Accounts,
    Circuit,
    Cooling,
    ModelQuota,
    QuotaBucket,
    SpendToday,
)


@dataclass(frozen=True, slots=True)
class AccountsDeps:
    """What the accounts view (and the capacity gauges) read: the registry, the health and
    quota snapshots, the lease counts, the request slots, the overlay and today's spend."""

    registry: Registry
    clock: Clock
    health: HealthSnapshots
    quota: QuotaSnapshots
    leases: LeaseCounts
    slots: RequestSlots
    overlay: OverlayReads
    spend_today: TodaysSpend


async def accounts_view(deps: AccountsDeps, only: str | None = None) -> Accounts:
    accounts = [a for a in deps.registry.accounts if only is None or a.id == only]
    now = deps.clock.now()
    epoch = now.timestamp()
    ids = [a.id for a in accounts]
    pairs = [(a.id, served) for a in accounts for served in dict.fromkeys(a.models.values())]
    snapshot = await deps.health.snapshot(pairs, epoch)
    learned = await deps.quota.snapshot(pairs, epoch)
    leases = await deps.leases.live_lease_counts(ids, now)
    in_flight = await requests_in_flight(deps.slots, accounts, epoch)
    verdict = await deps.overlay.verdict()
    spend = await deps.spend_today.by_account()
    # While the chain is corrupt no state can be vouched for: say so rather than guess.
    admin: dict[str, str] = dict(verdict.overlay)
    default = "unknown" if verdict.status == "corrupt" else "enabled"
    return Accounts(
        accounts=tuple(
            _account(
                a,
                snapshot,
                admin.get(a.id, default),
                leases.get(a.id, 0),
                in_flight.get(a.id),
                _spend(spend.get(a.id)),
                quota_views(a, learned, epoch),
            )
            for a in accounts
        ),
        revision=verdict.revision,
        chain=verdict.status,
    )


def account_read(view: Accounts) -> AccountRead:
    """The one account of `accounts_view(only=...)`, with the chain's revision and status."""
    return AccountRead(**dict(view.accounts[0]), revision=view.revision, chain=view.chain)


def _spend(group: UsageGroup | None) -> SpendToday:
    """Since midnight UTC, in the accounts file's currency (refreshed every 30 s at most)."""
    if group is None:
        return SpendToday(requests=0, input_tokens=0, output_tokens=0, cost=None)
    return SpendToday(
        requests=group.requests,
        input_tokens=group.input_tokens,
        output_tokens=group.output_tokens,
        cost=group.cost,
    )


async def requests_in_flight(
    slots: RequestSlots, accounts: Sequence[Account], epoch: float
) -> dict[str, int]:
    """Live request slots of the accounts that have a request ceiling (the only ones counted)."""
    counted = [a.id for a in accounts if a.request_capacity is not None]
    if not counted:
        return {}
    try:
        return await slots.in_flight(counted, epoch)
    except StoreError:
        raise GatewayError(
            "unavailable", "the request-slot store is unreachable", retry_after_s=1.0
        ) from None


def _account(
    account: Account,
    snapshot: HealthSnapshot,
    admin_state: str,
    leases: int,
    in_flight: int | None,
    spend: SpendToday,
    quota: tuple[ModelQuota, ...],
) -> AccountView:
    cooling = tuple(
        Cooling(model=served, until=from_epoch(c.until), reason=c.reason, trips=c.trips)
        for served in dict.fromkeys(account.models.values())
        if (c := snapshot.cooling_for(account.id, served)) is not None
    )
    circuit = snapshot.circuit(account.id)
    return AccountView(
        id=account.id,
        provider=account.provider,
        configured=account.configured,
        admin_state=admin_state,
        health=account_health(snapshot, account.id),
        cooling_models=cooling,
        circuit=Circuit(
            open=circuit is not None,
            until=from_epoch(circuit.until) if circuit else None,
            reason=circuit.reason if circuit else None,
        ),
        leases_held=leases,
        lease_capacity=account.lease_capacity,
        requests_in_flight=in_flight,
        request_capacity=account.request_capacity,
        spend_today=spend,
        quota=quota,
    )


def quota_views(
    account: Account, learned: Mapping[tuple[str, str], Quota], now: float
) -> tuple[ModelQuota, ...]:
    """Per served model: what the proxies learned from the provider, else what the accounts
    file declares (its limits only: what each proxy has sent is its own count)."""
    views = []
    for served in dict.fromkeys(account.models.values()):
        quota = learned.get((account.id, served))
        observed_at = None if quota is None else from_epoch(quota.observed_at)
        if quota is None and (limits := account.limits.get(served)) is not None:
            quota = declared_quota(account.id, served, limits, now)
        if quota is None:
            continue
        buckets = tuple(
            QuotaBucket(
                dimension=dimension,
                limit=bucket.limit,
                remaining=(
                    None
                    if observed_at is None or bucket.remaining is None
                    else room_now(bucket, quota.observed_at, now)
                ),
                reset=None if bucket.reset_at is None else from_epoch(bucket.reset_at),
            )
            for dimension, bucket in quota.buckets.items()
        )
        views.append(
            ModelQuota(model=served, source=quota.source, observed_at=observed_at, buckets=buckets)
        )
    return tuple(views)
