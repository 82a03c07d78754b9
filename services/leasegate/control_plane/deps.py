"""What the control plane's services use, named: built once from the runtime, faked in tests.

Mint, hops, renewal and revocation take a `MintDeps` rather than the whole `ControlRuntime`:
the clock, the id source, the storage port (`MintStore`), health snapshots, the admin
overlay's verdict, the registry, the revocation bus and the settings values they read. Each is
a Protocol or a value, so a test hands in in-memory twins. The runtime builds one at start-up;
the service tests build one over in-memory twins (`tests/fixtures/control.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from leasegate.accounts import Candidate, Registry
from leasegate.audit import ChainVerdict
from leasegate.core.clock import Clock, new_id
from leasegate.core.errors import GatewayError, PassOver
from leasegate.core.ports.health import HealthSnapshot
from leasegate.core.ports.revocation import Revocation
from leasegate.core.ports.storage import MintStore
from leasegate.core.records import AdminState, KeyRecord
from leasegate.routing.selection import NO_COOLDOWNS, Facts, NoneEligible, Selected, select
from leasegate.web.spend_totals import SpendTotals

IdSource = Callable[[str], str]
"""`prefix -> unique id` (`md_3f9c…`): `core.clock.new_id` in production."""


class HealthSnapshots(Protocol):
    """The part of the health store selection reads (`HealthStore` implements it)."""

    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        """Active cooldowns for these (account, served model) pairs and their circuits."""


class RevocationPublisher(Protocol):
    """The part of the revocation bus the control plane uses (`RevocationBus` implements it)."""

    async def publish(self, revocations: Sequence[Revocation]) -> None: ...


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


FIRST_CHUNK = 1
"""Candidates whose live facts a walk reads first (1: a mint whose first candidate is eligible
reads what a one-account mint reads); each further read doubles what the walk has read."""


async def live_facts(deps: MintDeps, candidates: Sequence[Candidate]) -> Facts:
    """Live facts for all these candidates: their health, their lease counts, the overlay."""
    now = deps.clock.now()
    health, leases = await _chunk_facts(deps, candidates, now)
    admin_states, admin_revision = await admin_view(deps.overlay)
    return Facts(
        now=now.timestamp(),
        admin_states=admin_states,
        admin_revision=admin_revision,
        health=health,
        leases_held=leases,
    )


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
        self.facts = Facts(now=now.timestamp())

    @classmethod
    async def read(cls, deps: MintDeps, candidates: Sequence[Candidate], start: int) -> LazyFacts:
        """The facts of the first chunk from `start`, and the overlay."""
        lazy = cls(deps, candidates, start, deps.clock.now())
        await lazy._read_more()
        admin_states, admin_revision = await admin_view(deps.overlay)
        lazy.facts = replace(lazy.facts, admin_states=admin_states, admin_revision=admin_revision)
        return lazy

    async def select(
        self, position: int, passed_over: tuple[PassOver, ...] = ()
    ) -> Selected | NoneEligible:
        """`routing.selection.select` over every candidate, reading more only while needed;
        `position` is at or after the start this was read from."""
        while True:
            outcome = select(self._candidates[: self._read_to], self.facts, position, passed_over)
            if isinstance(outcome, Selected) or self._read_to >= len(self._candidates):
                return outcome
            await self._read_more()

    async def _read_more(self) -> None:
        size = max(FIRST_CHUNK, self._read_to - self._start)
        chunk = self._candidates[self._read_to : self._read_to + size]
        health, leases = await _chunk_facts(self._deps, chunk, self._now)
        self.facts = self.facts.extended(health, leases)
        self._read_to += len(chunk)


async def _chunk_facts(
    deps: MintDeps, candidates: Sequence[Candidate], now: datetime
) -> tuple[HealthSnapshot, dict[str, int]]:
    """One health read and one lease count for these candidates."""
    if not candidates:
        return NO_COOLDOWNS, {}
    pairs = [(c.account.id, c.served_model) for c in candidates]
    snapshot = await deps.health.snapshot(pairs, now.timestamp())
    counted = [c.account.id for c in candidates if c.account.lease_capacity is not None]
    leases = await deps.store.live_lease_counts(counted, now) if counted else {}
    return snapshot, leases


async def admin_view(overlay: OverlayVerdict) -> tuple[dict[str, AdminState], int]:
    """The operators' overlay and the chain revision it was folded from; held
    (`account-state-unavailable`) while the chain is corrupt: an overlay nobody can verify
    never decides who may be selected. From the overlay's cached fold: the commit that
    follows re-checks the chain's revision under the lock."""
    verdict = await overlay.decided()
    if verdict.status == "corrupt":
        raise GatewayError("account-state-unavailable", "the admin audit chain does not verify")
    return dict(verdict.overlay), verdict.revision


async def announce_revoked(deps: MintDeps, keys: Sequence[KeyRecord]) -> None:
    """Tell every proxy replica, now, that these keys have ended."""
    await deps.revocations.publish([Revocation(k.key_id, k.expires_at.timestamp()) for k in keys])
