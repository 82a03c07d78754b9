"""Where a mint goes besides the pool's order: a session's affinity, and fair shares.

- **Affinity.** A fresh mint naming an `affinity` goes to the account that last served it for
  this tenant and requested model (a selected decision within `affinity_ttl_s`), while that
  account passes every selection filter, room included; otherwise the usual ordered walk.
  The map lives in `mint_decisions` itself (the decision records its affinity, which the mint
  commit writes anyway): one indexed read for a mint that names one, no write of its own, the
  same answer on every replica and after any restart, and its TTL is the decision's age.
  An account whose quota only needs a short wait (`AFFINITY_WAIT_S`) for room keeps the session
  (its cache is worth it; the proxy answers the first request with that Retry-After). When
  the affinity misses, the decision records the session's account and why in fields of its
  own (`affinity_miss_account_id`, `affinity_miss_code`); `passed_over` stays the ordered
  walk's.
- **Fair shares.** Once this control plane has itself turned a tenant away from the model's
  pool within the window (`no-eligible-account`, or a fair-share refusal: `Saturation`, the
  pool was full lately), a selected mint reads every candidate's facts and, when every
  account of the pool has a ceiling (the operator's or its quota's), asks the store who
  holds the pool's leases, whom a full pool turned away lately, on any replica, and what
  each tenant's leases spent over the lease-rate meter's interval (`PoolDemand`, one round
  trip); `capacity.fair_share.must_yield` decides (a starved tenant's share, and one lease
  of headroom for each asking tenant below its share), on the weights scaled by that spend
  (`fair_share.by_spend`: shares of the quota, counted in leases). A
  tenant that must yield is refused `tenant-fair-share-exceeded` (held, retry in 1 s): the
  gateway never waits. A pool that was not full lately costs nothing.
- **A lease owed.** A mint nobody has room for now, while the pool was full lately, of a
  tenant that holds less than its share of the pool as occupied while another holds more
  than its own (`fair_share.owed`; the tenant counts as turned away by this very mint), goes
  where a bucket holds a request again soonest, within `AFFINITY_WAIT_S`, below its whole
  sustained ceiling, as an affinity may; with every account at that ceiling, past it as far
  as the other tenants hold beyond their shares (`fair_share.lent`, at least
  `OWED_SPARE_LEASES`), one lease further at a time, where the quota came from the
  provider's headers (`owed_placement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from leasegate.accounts import Candidate
from leasegate.capacity.fair_share import by_spend, lent, must_yield, owed
from leasegate.capacity.waiting import HEAD_RETRY_S
from leasegate.control_plane.decision import Start
from leasegate.control_plane.deps import LazyFacts, MintDeps
from leasegate.core.errors import GatewayError
from leasegate.core.ports.storage import PoolDemand
from leasegate.routing.selection import Facts, NoneEligible, Selected
from leasegate.wire import MintBody

AFFINITY_WAIT_S = 1.0
"""How long a session's account may be quota-exhausted and still take the session's next
dispatch: about the proxy's `account-quota-exhausted` waits, far below a cache's worth."""
OWED_SPARE_LEASES = 1
"""How far past an account's whole sustained ceiling a lease owed to a starved tenant may go
when every account is at its ceiling, at least (further: what the other tenants hold beyond
their shares, `fair_share.lent`): the over-share tenant is held back meanwhile, so the
pool comes back under its ceilings as its leases end; the proxy paces the lease's requests by
the account's bucket."""
FAIR_SHARE_RETRY_S = 1.0
"""A lease frees when any key of the pool ends: worth a short wait."""


async def affinity_candidate(
    deps: MintDeps, body: MintBody, start: Start, candidates: Sequence[Candidate]
) -> Candidate | None:
    """The pool's candidate that last served the mint's affinity within the TTL, if any.
    Only a fresh mint follows its affinity: a hop walks on from the account it left."""
    if body.affinity is None or start.kind != "fresh":
        return None
    since = deps.clock.now() - timedelta(seconds=deps.limits.affinity_ttl_s)
    account_id = await deps.store.affinity_account(body.tenant, body.model, body.affinity, since)
    if account_id is None:
        return None
    return next((c for c in candidates if c.account.id == account_id), None)


def pool_capacity(candidates: Sequence[Candidate], facts: Facts) -> int | None:
    """The leases the pool can hold now: the effective ceilings (the operator's, or its
    quota's when lower) of its accounts that an operator has not taken out; None when any
    account has none (the pool never fills)."""
    total = 0
    for candidate in candidates:
        capacity = facts.unbounded().ceiling(candidate)
        if capacity is None:
            return None
        account = candidate.account
        state = facts.admin_states.get(account.id, "enabled")
        if account.configured and state == "enabled":
            total += capacity
    return total


async def owed_placement(
    deps: MintDeps,
    body: MintBody,
    candidates: Sequence[Candidate],
    live: LazyFacts,
    outcome: NoneEligible,
) -> Selected | None:
    """For a mint nobody has room for now: when its tenant (turned away by this mint, if not
    lately) holds less than its share of the pool as occupied while another tenant holds
    more (`fair_share.owed`), the account whose bucket holds a request again soonest, within
    `AFFINITY_WAIT_S`, below its whole sustained ceiling, else past it by the fewest leases
    up to what the other tenants hold beyond their shares (`fair_share.lent`, at least
    `OWED_SPARE_LEASES`; the proxy answers its first request with that short `Retry-After`).
    A saturated pool's buckets are empty at nearly every instant, so a starved tenant's mint would
    otherwise wait for a moment of room that the leases already held take first. None
    otherwise, and always, with no read, for a pool this control plane has not found full
    lately or one without ceilings."""
    full = await _full_pool(deps, body, candidates, live, deps.clock.now())
    if full is None:
        return None
    capacity, demand = full
    # this mint is being turned away from a full pool: its tenant counts as starved now
    starved = {*demand.starved, body.tenant}
    weights = by_spend(deps.limits.tenant_shares, demand.held, demand.spent)
    if not owed(body.tenant, capacity, demand.held, starved, weights):
        return None
    spare = max(OWED_SPARE_LEASES, lent(body.tenant, capacity, demand.held, starved, weights))
    # below the whole ceilings first, then one lease further past them at a time: the
    # leases lent spread over the accounts instead of piling on the soonest refill
    for past in range(spare + 1):
        placed = live.short_wait(outcome, AFFINITY_WAIT_S, spare=past)
        if placed is not None:
            return placed
    return None


async def fair_share_refusal(
    deps: MintDeps,
    body: MintBody,
    start: Start,
    candidates: Sequence[Candidate],
    live: LazyFacts,
    now: datetime,
) -> GatewayError | None:
    """`tenant-fair-share-exceeded` when this tenant's next lease would come out of the share
    of a tenant the full pool turned away lately, or when as many of this tenant's own
    dispatches as the pool has free leases have waited longer and still ask
    (`capacity.waiting`); None otherwise (and always, with no read, for a pool this control
    plane has not found full lately or one without ceilings)."""
    full = await _full_pool(deps, body, candidates, live, now)
    if full is None:
        return None
    capacity, demand = full
    weights = by_spend(deps.limits.tenant_shares, demand.held, demand.spent)
    if must_yield(body.tenant, capacity, demand.held, demand.starved, weights):
        message = "this tenant holds its share of a full pool while another waits: retry shortly"
    elif in_line(body, start) and deps.waiting.ahead(
        body.model, body.tenant, body.dispatch_id, now.timestamp()
    ) >= max(capacity - sum(demand.held.values()), 1):
        message = "this tenant's dispatches that waited longer take the pool's next leases"
    else:
        return None
    # the pool is as full for this tenant as a no-eligible-account: the check stays on
    deps.saturation.refused(
        body.model, body.tenant, now.timestamp(), deps.limits.fair_share_window_s
    )
    _join_line(deps, body, start, now)  # held back, it keeps its place in its tenant's line
    return GatewayError("tenant-fair-share-exceeded", message, retry_after_s=FAIR_SHARE_RETRY_S)


def in_line(body: MintBody, start: Start) -> bool:
    """Whether the mint waits in its tenant's line for a full pool (`capacity.waiting`): a
    fresh mint that narrows no residency of its own. A hop walks only the accounts after the
    one it left, and a narrowed mint only some accounts: neither could take every lease a
    younger mint of the tenant might, so neither holds one back."""
    return start.kind == "fresh" and body.allowed_providers is None and body.allowed_regions is None


def turned_away(
    deps: MintDeps, body: MintBody, start: Start, now: datetime, outcome: NoneEligible
) -> float | None:
    """The `Retry-After` of a mint nobody had room for, which takes (or keeps) its place in
    its tenant's line: when room comes only as some lease ends (`NoneEligible.lease_bound`),
    the tenant's longest-waiting dispatch comes back within `HEAD_RETRY_S` (the next lease is
    its); the others, and any wait whose end is known (a bucket's refill, a cooldown), as the
    refusal says."""
    if (
        _join_line(deps, body, start, now)
        and outcome.lease_bound
        and deps.waiting.head(body.model, body.tenant, body.dispatch_id, now.timestamp())
    ):
        return HEAD_RETRY_S
    return outcome.retry_after_s


def _join_line(deps: MintDeps, body: MintBody, start: Start, now: datetime) -> bool:
    """Note a mint a full pool turned away in its tenant's line (`in_line`); whether it
    stands in one. A tenant held back for another's share keeps its place too: when its
    turn comes back, its oldest dispatch is first."""
    if not in_line(body, start):
        return False
    deps.waiting.refused(body.model, body.tenant, body.dispatch_id, now.timestamp())
    return True


async def _full_pool(
    deps: MintDeps, body: MintBody, candidates: Sequence[Candidate], live: LazyFacts, now: datetime
) -> tuple[int, PoolDemand] | None:
    """The pool's capacity and who holds and waits for its leases, when this control plane
    turned someone away from it lately and every account has a ceiling; None otherwise, and
    then with no read at all (a pool not found full lately costs nothing)."""
    window_s = deps.limits.fair_share_window_s
    if not deps.saturation.lately(body.model, now.timestamp(), window_s):
        return None
    await live.read_all()
    capacity = pool_capacity(candidates, live.facts)
    if capacity is None:
        return None
    since = now - timedelta(seconds=window_s)
    spent_since = now - timedelta(seconds=deps.limits.spend_window_s)
    accounts = [c.account.id for c in candidates]
    demand = await deps.store.pool_demand(accounts, body.model, since, now, spent_since)
    return capacity, demand
