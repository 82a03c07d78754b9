"""What the control plane's services use, named: built once from the runtime, faked in tests.

Mint, hops, renewal and revocation take a `MintDeps` rather than the whole `ControlRuntime`:
the clock, the id source, the storage port (`MintStore`), health snapshots, the admin
overlay's verdict, the registry, the revocation bus and the settings values they read. Each is
a Protocol or a value, so a test hands in in-memory twins. The runtime builds one at start-up;
the service tests build one over in-memory twins (`tests/fixtures/control.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol

from leasegate.accounts import Candidate, Registry
from leasegate.audit import ChainVerdict, held_while_corrupt
from leasegate.audit.reads import ChainSnapshot
from leasegate.capacity.fair_share import Saturation
from leasegate.capacity.waiting import Waiting
from leasegate.core.clock import Clock, new_id
from leasegate.core.errors import PassOver
from leasegate.core.ports.health import HealthSnapshot
from leasegate.core.ports.quota import Quota
from leasegate.core.ports.revocation import Revocation
from leasegate.core.ports.storage import MintStore
from leasegate.core.records import AdminState, KeyRecord
from leasegate.providers import kind_named
from leasegate.routing.lease_ceiling import LeaseRate, prior_rate
from leasegate.routing.quota import declared_quota
from leasegate.routing.residency import UNRESTRICTED, Residency
from leasegate.routing.selection import (
    NO_COOLDOWNS,
    Facts,
    NoneEligible,
    Pair,
    Selected,
    affinity_code,
    filter_code,
    select,
    soonest_room,
)
from leasegate.web.spend_totals import SpendTotals

IdSource = Callable[[str], str]
"""`prefix -> unique id` (`md_3f9c…`): `core.clock.new_id` in production."""


class HealthSnapshots(Protocol):
    """The part of the health store selection reads (`HealthStore` implements it)."""

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        """Active cooldowns for these (account, served model) pairs and their circuits."""


class QuotaSnapshots(Protocol):
    """The part of the quota store selection reads (`QuotaStore` implements it)."""

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> Mapping[Pair, Quota]:
        """The latest quota learned for each pair that has one."""


class LeaseRates(Protocol):
    """What one live lease of each (account, served model) spends per second, smoothed
    (`control_plane.lease_rates.LeaseRateMeter` implements it)."""

    def current(self) -> Mapping[Pair, LeaseRate]: ...


class RevocationPublisher(Protocol):
    """The part of the revocation bus the control plane uses (`RevocationBus` implements it)."""

    async def publish(self, revocations: Sequence[Revocation]) -> None: ...


class OverlayReads(Protocol):
    """The part of `AdminOverlay` a read view, a gauge or the reconciler reads."""

    async def verdict(self) -> ChainVerdict:
        """The verified overlay, from the cache while the chain's head is unchanged."""
        ...


class OverlayRecords(Protocol):
    """The part of `AdminOverlay` a page showing the chain's records reads (the console)."""

    async def read_full(self) -> tuple[ChainVerdict, ChainSnapshot]:
        """The verdict and the records it was folded from, read from the chain now."""
        ...


class OverlayVerdict(Protocol):
    """The part of `AdminOverlay` a mint or a renewal decides with."""

    async def decided(self) -> ChainVerdict:
        """The verified overlay, possibly from a cache the commit re-checks."""

    def forget(self) -> None:
        """Drop any cached fold: the next `decided()` reads the chain again."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The settings values the services read."""

    key_ttl_s: int
    key_max_ttl_s: int
    max_fallback_hops: int
    affinity_ttl_s: float = 300.0
    """How long after the last mint naming an affinity its account is still preferred."""
    fair_share_window_s: float = 3.0
    """How long a tenant a full pool refused counts as starved (fair shares)."""
    spend_window_s: float = 10.0
    """Over how long what each tenant's leases spend is compared (fair shares by spend,
    `fair_share.by_spend`): the lease-rate meter's interval."""
    tenant_shares: Mapping[str, float] = field(default_factory=dict)
    """Weights of the tenants' fair shares; a tenant not named weighs 1."""
    tenant_residency: Mapping[str, Residency] = field(default_factory=dict)
    """Where each tenant's dispatches may be served (data residency); not named: anywhere."""
    lease_spread: float = 1.0
    """The share of a pair's sustained lease ceiling filled before the walk moves on while the
    pool has room elsewhere (`Facts.spread`)."""
    lease_probe: int | None = None
    """The live leases a pair nothing is known of is filled to while the pool has room
    elsewhere (`Facts.probe`); None: no such bound."""
    lease_prior: LeaseRate | None = None
    """What a lease of a pair never measured is assumed to spend when no pair of the pool was
    measured either (`lease_ceiling.default_prior`, the one the rate meter starts from);
    None: no prior (a test's pool bounded by the operator's ceilings alone)."""


@dataclass(frozen=True, slots=True)
class MintDeps:
    clock: Clock
    store: MintStore
    health: HealthSnapshots
    overlay: OverlayVerdict
    registry: Registry
    revocations: RevocationPublisher
    limits: Limits
    spend: SpendTotals
    """Running totals (rebuilt from evidence when unknown), for tenant budgets."""
    new_id: IdSource = new_id
    quota: QuotaSnapshots | None = None
    """The learned quotas (adaptive lease ceilings); None: no quota is known to anyone."""
    lease_rates: LeaseRates | None = None
    """The measured spend of a live lease; None: never measured (ceilings stay the operator's)."""
    saturation: Saturation = field(default_factory=Saturation)
    """When this control plane last found each model's pool full (fair shares)."""
    waiting: Waiting = field(default_factory=Waiting)
    """Which of each tenant's dispatches a full pool turned away, since when (oldest first)."""


FIRST_CHUNK = 1
"""Candidates whose live facts a walk reads first (1: a mint whose first candidate is eligible
reads what a one-account mint reads); each further read doubles what the walk has read."""


async def live_facts(deps: MintDeps, candidates: Sequence[Candidate]) -> Facts:
    """Live facts for all these candidates: their health, their lease counts, the overlay."""
    now = deps.clock.now()
    facts = await _chunk_facts(deps, candidates, _empty_facts(deps, now, candidates), now)
    admin_states, admin_revision = await admin_view(deps.overlay)
    return replace(facts, admin_states=admin_states, admin_revision=admin_revision)


class LazyFacts:
    """A mint's live facts, read in walk order and in growing chunks: the first `FIRST_CHUNK`
    candidates from the walk's start, then as many again as read so far, until selection picks
    one or every candidate is read. Selection is first-eligible (`routing.selection`), so the
    answer is the one facts for every candidate would give; a mint whose first candidate is
    eligible reads the health and leases of a few accounts, not of all serving the model.
    Every chunk is read at the walk's one `now`; the overlay is read once."""

    def __init__(
        self, deps: MintDeps, candidates: Sequence[Candidate], start: int, now: datetime
    ) -> None:
        self._deps = deps
        self._candidates = candidates
        self._start = start
        self._read_to = start
        self._now = now
        self.facts = _empty_facts(deps, now, candidates)
        self._past_bounds: Literal["spread", "probe", "affinity", "spare"] | None = None
        """Which advisory bound the last selection placed past (nobody had room), if any;
        `affinity`: the affinity's account took the mint, up to its whole ceiling; `spare`:
        an owed lease went `_spare` leases past the whole ceiling (`short_wait`)."""
        self._spare = 0

    @classmethod
    async def read(
        cls,
        deps: MintDeps,
        candidates: Sequence[Candidate],
        start: int,
        residency: Residency = UNRESTRICTED,
    ) -> LazyFacts:
        """The facts of the first chunk from `start`, and the overlay; the walk filters on
        the mint's `residency`."""
        lazy = cls(deps, candidates, start, deps.clock.now())
        await lazy._read_more()
        admin_states, admin_revision = await admin_view(deps.overlay)
        lazy.facts = replace(
            lazy.facts,
            admin_states=admin_states,
            admin_revision=admin_revision,
            residency=residency,
        )
        return lazy

    async def select(
        self, position: int, passed_over: tuple[PassOver, ...] = ()
    ) -> Selected | NoneEligible:
        """`routing.selection.select` over every candidate, reading more only while needed;
        `position` is at or after the start this was read from."""
        self._past_bounds = None
        while True:
            outcome = select(self._candidates[: self._read_to], self.facts, position, passed_over)
            if isinstance(outcome, Selected):
                return outcome
            if self._read_to >= len(self._candidates):
                return self._past_probes(outcome, position, passed_over)
            await self._read_more()

    def _past_probes(
        self, outcome: NoneEligible, position: int, passed_over: tuple[PassOver, ...]
    ) -> Selected | NoneEligible:
        """Nobody has room under the advisory bounds. First past the spreading share (in pool
        order, up to the whole ceilings); else, when only probes stand in the way, onto the
        probed account holding the fewest leases (unbounded: concurrent overflow may land on
        one account, but is never refused for the probe's sake); otherwise the refusal
        stands. Only a pair still probed (nothing known of its quota) takes that unbounded
        overflow: a known quota's whole ceiling holds however the walk got there (a mint that
        lost the race for an account at its share would otherwise land there unbounded); only
        a lease owed goes past it, by `short_wait`."""
        unbounded = self.facts.unbounded()
        # from the walk's start: an account whose reservation was lost at its share (marked
        # full at it) still has room up to its whole ceiling
        again = select(self._candidates, unbounded, self._start)
        if isinstance(again, Selected):
            self._past_bounds = "spread"
            chosen_id = again.candidate.account.id
            lost = {p.account_id: p for p in passed_over if p.account_id != chosen_id}
            walked = tuple(p for p in again.passed_over if p.account_id not in lost)
            return Selected(again.candidate, (*lost.values(), *walked))
        unprobed = replace(unbounded, probe=None)
        probed = [
            c
            for c in self._candidates[self._start :]  # a lost race moved `position` past one
            if self.facts.probing(c) and filter_code(c, unprobed) is None
        ]
        if not probed:
            return outcome
        held = self.facts.leases_held
        chosen = min(probed, key=lambda c: (held.get(c.account.id, 0), c.position))
        self._past_bounds = "probe"
        skipped = tuple(p for p in outcome.passed_over if p.account_id != chosen.account.id)
        return Selected(chosen, skipped)

    def short_wait(self, outcome: NoneEligible, wait_s: float, spare: int = 0) -> Selected | None:
        """For a mint nobody has room for now, the candidate from the walk's start whose
        quota has room for one average request again soonest within `wait_s`, below its
        whole sustained ceiling (`routing.selection.soonest_room`), or `spare` leases past it
        where the provider's headers told the quota (`_spare_room`); None when there is none.
        The reservation then holds it to that ceiling."""
        whole = self.facts.unbounded()
        walked = self._candidates[self._start : self._read_to]
        if spare:
            walked = [c for c in walked if _spare_room(c, whole)]
            whole = whole.with_spare(spare)
        chosen = soonest_room(walked, whole, wait_s)
        if chosen is None:
            return None
        self._past_bounds, self._spare = ("spare" if spare else "affinity"), spare
        skipped = tuple(p for p in outcome.passed_over if p.account_id != chosen.account.id)
        return Selected(chosen, skipped)

    def ceiling(self, candidate: Candidate) -> int | None:
        """The ceiling the reservation holds the selected candidate to: the advisory bounds'
        unless the walk placed past them, or the affinity's account took the mint (it may
        fill its account to the whole ceiling, `routing.selection.affinity_code`), or an owed
        lease was placed `spare` leases past the whole ceiling."""
        if self._past_bounds == "probe":
            return candidate.account.lease_capacity  # probed: none is set
        whole = self._past_bounds in ("spread", "affinity", "spare")
        ceiling = (self.facts.unbounded() if whole else self.facts).ceiling(candidate)
        if self._past_bounds != "spare" or ceiling is None:
            return ceiling
        capacity = candidate.account.lease_capacity  # never past the operator's
        past = ceiling + self._spare
        return past if capacity is None else min(past, capacity)

    async def affinity_code(self, candidate: Candidate, wait_s: float) -> str | None:
        """Why the affinity's account cannot take the mint (None: it can, and `ceiling` is
        then its whole ceiling; `routing.selection.affinity_code`), reading its facts first
        when the walk has not (it may stand anywhere in the pool)."""
        if not self._start <= candidate.position < self._read_to:
            self.facts = await _chunk_facts(self._deps, [candidate], self.facts, self._now)
        code = affinity_code(candidate, self.facts, wait_s)
        self._past_bounds = "affinity" if code is None else None
        return code

    def mark_full(self, candidate: Candidate, ceiling: int | None = None) -> None:
        """The reservation found this account at `ceiling` (default: its ceiling under the
        walk's bounds): the walk passes over it, up to that ceiling (never lowered)."""
        capacity = self.facts.ceiling(candidate) if ceiling is None else ceiling
        if capacity is not None:
            account = candidate.account.id
            count = max(capacity, self.facts.leases_held.get(account, 0))
            held = {**self.facts.leases_held, account: count}
            self.facts = replace(self.facts, leases_held=held)

    async def read_all(self) -> None:
        """Every candidate's facts from the start on (fair shares need the whole pool's)."""
        while self._read_to < len(self._candidates):
            await self._read_more()

    async def _read_more(self) -> None:
        size = max(FIRST_CHUNK, self._read_to - self._start)
        chunk = self._candidates[self._read_to : self._read_to + size]
        self.facts = await _chunk_facts(self._deps, chunk, self.facts, self._now)
        self._read_to += len(chunk)


def _spare_room(candidate: Candidate, facts: Facts) -> bool:
    """Whether a lease may go past the candidate's whole ceiling: its quota was learned from
    the provider's headers, which correct the proxy's view at every answer (never a quota
    only declared, which the proxy paces by alone: a guess of the provider's bucket), and
    an operator's `lease_capacity`, if any, is not reached."""
    account = candidate.account
    quota = facts.quotas.get((account.id, candidate.served_model))
    held = facts.leases_held.get(account.id, 0)
    return (
        quota is not None
        and quota.source == "headers"
        and (account.lease_capacity is None or held < account.lease_capacity)
    )


def _empty_facts(deps: MintDeps, now: datetime, candidates: Sequence[Candidate]) -> Facts:
    """No account's facts yet; the measured lease rates and the pool's prior."""
    rates = deps.lease_rates.current() if deps.lease_rates is not None else {}
    pool = {(c.account.id, c.served_model) for c in candidates}
    prior = prior_rate((r for pair, r in rates.items() if pair in pool), deps.limits.lease_prior)
    return Facts(
        now=now.timestamp(),
        lease_rates=rates,
        prior=prior,
        probe=deps.limits.lease_probe,
        unstated=frozenset(
            c.account.id for c in candidates if not kind_named(c.account.provider).states_quota
        ),
        spread=deps.limits.lease_spread,
    )


async def _chunk_facts(
    deps: MintDeps, candidates: Sequence[Candidate], facts: Facts, now: datetime
) -> Facts:
    """`facts` and these candidates' own: their health and quotas (read together when a
    quota store is configured), then one lease count for those with a ceiling."""
    if not candidates:
        return facts
    pairs = [(c.account.id, c.served_model) for c in candidates]
    quotas: Mapping[Pair, Quota] = {}
    if deps.quota is None:
        health = await deps.health.snapshot(pairs, facts.now)
    else:
        health, quotas = await asyncio.gather(
            deps.health.snapshot(pairs, facts.now), deps.quota.snapshot(pairs, facts.now)
        )
    facts = facts.extended(health, {}, {**_declared(candidates, facts.now), **quotas})
    counted = [c.account.id for c in candidates if _ceilinged(c, facts)]
    if counted:
        facts = facts.extended(NO_COOLDOWNS, await deps.store.live_lease_counts(counted, now))
    return facts


def _declared(candidates: Sequence[Candidate], now: float) -> dict[Pair, Quota]:
    """The accounts file's declared limits, full at `now`, for pairs nothing was learned of
    (what was learned, read after, replaces them)."""
    found: dict[Pair, Quota] = {}
    for candidate in candidates:
        limits = candidate.account.limits.get(candidate.served_model)
        if limits is not None:
            quota = declared_quota(candidate.account.id, candidate.served_model, limits, now)
            if quota is not None:
                found[(candidate.account.id, candidate.served_model)] = quota
    return found


def _ceilinged(candidate: Candidate, facts: Facts) -> bool:
    """Whether selection needs the account's lease count: it has an operator's ceiling, a
    learned quota (whose sustained ceiling counts leases), or a probe."""
    pair = (candidate.account.id, candidate.served_model)
    probed = facts.probe_of(candidate) is not None
    return candidate.account.lease_capacity is not None or pair in facts.quotas or probed


async def admin_view(overlay: OverlayVerdict) -> tuple[dict[str, AdminState], int]:
    """The operators' overlay and the chain revision it was folded from; held
    (`account-state-unavailable`) while the chain is corrupt: an overlay nobody can verify
    never decides who may be selected. From the overlay's cached fold: the commit that
    follows re-checks the chain's revision under the lock."""
    verdict = await overlay.decided()
    if verdict.status == "corrupt":
        raise held_while_corrupt()
    return dict(verdict.overlay), verdict.revision


async def announce_revoked(revocations: RevocationPublisher, keys: Sequence[KeyRecord]) -> None:
    """Tell every proxy replica, now, that these keys have ended."""
    await revocations.publish([Revocation(k.key_id, k.expires_at.timestamp()) for k in keys])
