"""The accounts view: registry order, configuration, health, and both capacity counts.

`requests_in_flight` is null for an account without a request ceiling: the proxy counts
nothing on the hot path for it, so there is no true number to report.
"""

from __future__ import annotations

from collections.abc import Sequence

from leasegate.accounts import Account
from leasegate.control_plane.runtime import ControlRuntime
from leasegate.core.clock import from_epoch
from leasegate.core.errors import GatewayError
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import HealthSnapshot
from leasegate.db.usage import UsageGroup
from leasegate.routing.health import account_health
from leasegate.wire import Account as AccountView
from leasegate.wire import AccountRead, Accounts, Circuit, Cooling, SpendToday


async def accounts_view(runtime: ControlRuntime, only: str | None = None) -> Accounts:
    accounts = [a for a in runtime.registry.accounts if only is None or a.id == only]
    now = runtime.clock.now()
    epoch = now.timestamp()
    ids = [a.id for a in accounts]
    pairs = [(a.id, served) for a in accounts for served in dict.fromkeys(a.models.values())]
    snapshot = await runtime.stores.health.snapshot(pairs, epoch)
    leases = await runtime.stores.store.live_lease_counts(ids, now)
    in_flight = await requests_in_flight(runtime, accounts, epoch)
    verdict = await runtime.overlay.verdict()
    spend = await runtime.spend_today.by_account(runtime)
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
    runtime: ControlRuntime, accounts: Sequence[Account], epoch: float
) -> dict[str, int]:
    """Live request slots of the accounts that have a request ceiling (the only ones counted)."""
    counted = [a.id for a in accounts if a.request_capacity is not None]
    if not counted:
        return {}
    try:
        return await runtime.stores.slots.in_flight(counted, epoch)
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
    )
