"""Selection: walk a model's candidates from a start position and take the first one that no
live filter rules out, recording the code of the first filter that ruled out each one passed.

Filters, cheapest and most permanent first (SPEC §3); the first that applies is the code:

    1 not-configured  2 residency  3 administratively-disabled  4 administratively-draining
    5 circuit-open  6 model-cooling  7 lease-capacity-exhausted  8 quota-exhausted

Filter 2 is the tenant's data residency (`routing.residency`): static, like filter 1, so it
never counts toward a refusal's `cooldown_scope` or `retry_after_s`.

Filter 8 is the adaptive ceiling (`routing.lease_ceiling`): the (account, served model)'s learned
quota has no room for one more request now, or its live leases already spend what the quota
refills at the rate one lease was measured to spend.

The candidate list is the static part (a pure function of model and registry); `Facts` is the
live part, read by the service. Nothing here does I/O.

The walk takes the first eligible candidate and looks at each candidate's own facts only, so
facts for a prefix of the walk decide it whenever the prefix holds the winner: `select` over
`candidates[:k]` answers as over all of them once it selects. Only a `NoneEligible` (its
pass-over list, cooldown scope and retry-after) needs every candidate's facts. The service reads
facts in growing chunks on that basis (`control_plane/deps.py`, `LazyFacts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from leasegate.accounts import Candidate
from leasegate.core.errors import PassOver
from leasegate.core.ports.health import HealthSnapshot
from leasegate.core.ports.quota import Quota
from leasegate.core.records import AdminState
from leasegate.routing.health import health_block
from leasegate.routing.lease_ceiling import (
    LEASE_TURNOVER_S,
    LeaseRate,
    Room,
    effective_ceiling,
    quota_room,
    quota_wait,
)
from leasegate.routing.residency import UNRESTRICTED, Residency

NO_COOLDOWNS = HealthSnapshot(circuits={}, cooling={})
Pair = tuple[str, str]
"""(account id, served model)."""
MODEL_SCOPE = ("model-cooling", "quota-exhausted")
"""Pass-overs of one (account, served model), not of the whole account."""
STATIC = ("residency",)
"""Pass-overs no wait can change: left out of a refusal's cooldown scope."""


@dataclass(frozen=True, slots=True)
class Facts:
    """The live facts selection filters on, as of one instant (`now`, epoch seconds)."""

    now: float
    admin_states: Mapping[str, AdminState] = field(default_factory=dict)
    """Missing accounts are enabled."""
    health: HealthSnapshot = NO_COOLDOWNS
    """The active cooldowns and circuits of the candidates, read at `now`."""
    leases_held: Mapping[str, int] = field(default_factory=dict)
    admin_revision: int = 0
    """The audit chain's length the admin states were folded from; the commit re-checks it."""
    quotas: Mapping[Pair, Quota] = field(default_factory=dict)
    """The learned quotas of the candidates that have one."""
    lease_rates: Mapping[Pair, LeaseRate] = field(default_factory=dict)
    """What one live lease of each pair was measured to spend per second."""
    prior: LeaseRate | None = None
    """What a lease of a pair not measured yet is taken to spend (`lease_ceiling.prior_rate`);
    None: such a pair is bounded only by what its quota holds now."""
    probe: int | None = None
    """The live leases a pair whose quota is not known yet (none learned or declared) takes
    before the walk moves on: its quota is learned from their
    first answers (within a second); past every probe, `LazyFacts` places on the probed
    account holding the fewest leases. None: no such bound."""
    unstated: frozenset[str] = frozenset()
    """Accounts whose provider never states its quota (no rate-limit headers): never probed,
    since nothing will be learned of them but their measured spend."""
    spread: float | None = None
    """The share of each pair's sustained lease ceiling the walk fills before it moves on down
    the pool (advisory like the probe: `LazyFacts.select` fills past it when nobody else has
    room; the reservation's lock holds the whole ceiling); None: the whole ceiling
    (`lease_ceiling.sustained_leases`)."""
    residency: Residency = UNRESTRICTED
    """The providers and regions the mint's tenant may be served from."""

    def extended(
        self,
        health: HealthSnapshot,
        leases_held: Mapping[str, int],
        quotas: Mapping[Pair, Quota] | None = None,
    ) -> Facts:
        """These facts and those of more candidates, read at the same `now`."""
        return replace(
            self,
            health=HealthSnapshot(
                circuits={**self.health.circuits, **health.circuits},
                cooling={**self.health.cooling, **health.cooling},
            ),
            leases_held={**self.leases_held, **leases_held},
            quotas={**self.quotas, **(quotas or {})},
        )

    def ceiling(self, candidate: Candidate) -> int | None:
        """The candidate's effective lease ceiling: what its quota sustains at the measured
        per-lease rate (the spreading share of it; the probe when nothing is known), bounded
        by the operator's `lease_capacity`. The reservation holds it under its lock, so
        concurrent mints spread as a lone one does."""
        pair = (candidate.account.id, candidate.served_model)
        probe = self.probe_of(candidate)
        return effective_ceiling(
            self.quotas.get(pair),
            self.rate(pair),
            candidate.account.lease_capacity,
            probe,
            self.spread,
        )

    def probe_of(self, candidate: Candidate) -> int | None:
        """The probe that bounds this candidate while its quota is unknown (it applies only
        then): none for an account whose provider never states its quota, or one an operator
        sized. Not lifted by a measured spend: a first interval's sample comes before the
        first answers have said the quota, and would leave the pair unbounded."""
        account = candidate.account
        if account.id in self.unstated or account.lease_capacity:
            return None
        return self.probe

    def probing(self, candidate: Candidate) -> bool:
        """Whether the probe bounds this candidate now: it has one and nothing is known of
        its quota (neither learned nor declared)."""
        pair = (candidate.account.id, candidate.served_model)
        return self.probe_of(candidate) is not None and pair not in self.quotas

    def unbounded(self) -> Facts:
        """These facts without the spreading share: the ceilings the pool has (the probe
        stays: `LazyFacts` spreads what comes past the probes itself)."""
        return replace(self, spread=None)

    def with_spare(self, spare: int) -> Facts:
        """These facts as if every account held `spare` leases fewer: its ceilings' room
        `spare` leases past them (an owed lease, `placement.owed_placement`)."""
        held = {account: max(0, n - spare) for account, n in self.leases_held.items()}
        return replace(self, leases_held=held)

    def rate(self, pair: Pair) -> LeaseRate | None:
        """What one live lease of the pair spends: as measured, else the prior."""
        return self.lease_rates.get(pair, self.prior)

    def quota_room(self, candidate: Candidate) -> Room | None:
        """None when the candidate's quota takes one more lease now; else when it will."""
        pair = (candidate.account.id, candidate.served_model)
        held = self.leases_held.get(candidate.account.id, 0)
        probe = self.probe_of(candidate)
        return quota_room(
            self.quotas.get(pair), self.rate(pair), held, self.now, probe, self.spread
        )


@dataclass(frozen=True, slots=True)
class Selected:
    candidate: Candidate
    passed_over: tuple[PassOver, ...]


@dataclass(frozen=True, slots=True)
class NoneEligible:
    passed_over: tuple[PassOver, ...]
    cooldown_scope: Literal["model", "account", "mixed"] | None
    retry_after_s: float | None
    """Soonest end of a transient pass-over; None when nothing passed over is transient."""
    lease_bound: bool = False
    """Whether that soonest end is only some lease ending, at no time known (a ceiling, the
    operator's or its quota's, is held: `LEASE_TURNOVER_S` is a guess), rather than a known
    end (a cooldown, a bucket's refill)."""


def filter_code(candidate: Candidate, facts: Facts, *, renewal: bool = False) -> str | None:
    """The first filter that rules `candidate` out, or None. A renewal stops at filter 5."""
    account = candidate.account
    if not account.configured:
        return "not-configured"
    if not facts.residency.allows(account.provider, account.region):
        return "residency"
    state = facts.admin_states.get(account.id, "enabled")
    if state == "disabled":
        return "administratively-disabled"
    if state == "draining":
        return "administratively-draining"
    blocked = health_block(facts.health, account.id, candidate.served_model)
    if blocked is not None and (blocked[0] == "circuit-open" or not renewal):
        return blocked[0]  # a renewal is refused by an open circuit only
    if renewal:
        return None
    capacity = account.lease_capacity
    if capacity is not None and facts.leases_held.get(account.id, 0) >= capacity:
        return "lease-capacity-exhausted"
    if facts.quota_room(candidate) is not None:
        return "quota-exhausted"
    return None


def affinity_code(candidate: Candidate, facts: Facts, wait_s: float) -> str | None:
    """`filter_code` for the account a mint's affinity points at, which may make the session
    wait a little for its cache: an account `quota-exhausted` only until its bucket holds one
    average request again, within `wait_s`, and below its sustained ceiling, takes it (the
    proxy refuses its first request with that short `Retry-After`; the gateway never waits)."""
    code, wait = _code_and_wait(candidate, facts)
    return None if wait <= wait_s else code


def soonest_room(candidates: Sequence[Candidate], facts: Facts, wait_s: float) -> Candidate | None:
    """Of the candidates `affinity_code` would let take a mint, the one whose bucket holds a
    request again soonest (room now counts as no wait); ties go to the fewest leases held,
    then to pool order. For a lease owed to a starved tenant (`placement.owed_placement`):
    the proxy refuses the lease's first request until that refill, so the soonest costs the
    tenant least, and owed leases spread over the buckets refilling rather than piling on
    the pool's first account. None when none refills within `wait_s`."""
    best: tuple[float, int, int] | None = None
    chosen: Candidate | None = None
    for candidate in candidates:
        _, wait = _code_and_wait(candidate, facts)
        rank = (wait, facts.leases_held.get(candidate.account.id, 0), candidate.position)
        if wait <= wait_s and (best is None or rank < best):
            best, chosen = rank, candidate
    return chosen


def _code_and_wait(candidate: Candidate, facts: Facts) -> tuple[str | None, float]:
    """`filter_code`, and how long a mint would wait for the candidate if it may wait for
    its quota's bucket (and only for that): 0 when nothing rules it out, the seconds until
    the bucket holds one more average request when only its quota does (infinity while its
    live leases hold the sustained ceiling, `quota_wait`), infinity for any other filter."""
    code = filter_code(candidate, facts)
    if code is None:
        return None, 0.0
    if code != "quota-exhausted":
        return code, math.inf
    pair = (candidate.account.id, candidate.served_model)
    held = facts.leases_held.get(candidate.account.id, 0)
    when = quota_wait(facts.quotas.get(pair), facts.rate(pair), held, facts.now)
    return code, 0.0 if when is None else max(when - facts.now, 0.0)


def select(
    candidates: Sequence[Candidate],
    facts: Facts,
    start: int = 0,
    passed_over: tuple[PassOver, ...] = (),
) -> Selected | NoneEligible:
    """First eligible candidate at or after `start`; `passed_over` carries earlier skips."""
    skipped = list(passed_over)
    for candidate in candidates[start:]:
        code = filter_code(candidate, facts)
        if code is None:
            return Selected(candidate, tuple(skipped))
        skipped.append(PassOver(candidate.account.id, code))
    return none_eligible(candidates, facts, tuple(skipped))


def none_eligible(
    candidates: Sequence[Candidate], facts: Facts, passed_over: tuple[PassOver, ...]
) -> NoneEligible:
    retry_after_s, lease_bound = _soonest_retry(candidates, facts, passed_over)
    return NoneEligible(passed_over, cooldown_scope(passed_over), retry_after_s, lease_bound)


def cooldown_scope(passed_over: Sequence[PassOver]) -> Literal["model", "account", "mixed"] | None:
    """`model` when every pass-over was of the (account, model) (model-cooling,
    quota-exhausted), `account` when none was, else `mixed`; static pass-overs (residency)
    are left out, and only they: None."""
    passed_over = [p for p in passed_over if p.code not in STATIC]
    if not passed_over:
        return None
    cooling = sum(1 for p in passed_over if p.code in MODEL_SCOPE)
    if cooling == len(passed_over):
        return "model"
    return "account" if cooling == 0 else "mixed"


def _soonest_retry(
    candidates: Sequence[Candidate], facts: Facts, passed_over: Sequence[PassOver]
) -> tuple[float | None, bool]:
    """The soonest end of a transient pass-over (None when none is transient), and whether
    that end is only some lease ending, at no time known (`LEASE_TURNOVER_S`)."""
    served = {c.account.id: c for c in candidates}
    ends: list[tuple[float, bool]] = []  # (when, only a lease ending)
    for skip in passed_over:
        candidate = served[skip.account_id]
        if skip.code in ("circuit-open", "model-cooling"):
            blocked = health_block(facts.health, skip.account_id, candidate.served_model)
            if blocked is not None:
                ends.append((blocked[1].until, False))
        elif skip.code == "quota-exhausted":
            room = facts.quota_room(candidate)
            if room is not None:  # None only if the facts moved since the pass-over
                ends.append(room)
    if ends:
        end, lease_bound = min(ends)
        return max(0.0, end - facts.now), lease_bound
    if any(p.code == "lease-capacity-exhausted" for p in passed_over):
        return LEASE_TURNOVER_S, True  # a lease frees when any key of the account ends
    return None, False
