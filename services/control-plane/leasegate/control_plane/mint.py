"""Mint: choose the account, reserve the lease, record the decision, hand out the key once.

The selection walk is pure (`routing.selection`); the reservation is the database's
(`commit_mint`, one transaction). Selection's capacity check is advisory: when the
reservation finds the account full after all, that candidate is recorded as
`lease-capacity-exhausted` and the walk continues past it, so a lost race never leaves a key
behind and never exceeds the ceiling.

Order of the answers (SPEC §3): citation-conflict and a too-long ttl, then the hop clauses
(`hops.authorise_hop`), then model-not-served, dispatch-lease-held, and selection. Every
answer, refused or not, is a recorded decision; an `Idempotency-Key` replays it.

Every check returns a value: a new `Start`, a `Refusal`, or the mint's view. `mint` records a
refusal in one place (`refusals.recorded`) and raises its error there; nothing below it raises
a refusal. The collaborators are a `MintDeps` (`deps.py`), never the whole runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from leasegate.accounts import Candidate
from leasegate.audit import held_while_corrupt
from leasegate.control_plane.budget_refusal import tenant_budget_refusal
from leasegate.control_plane.decision import (
    Asked,
    Chosen,
    Refusal,
    Start,
    asked_of,
    decision_of,
    start_of,
)
from leasegate.control_plane.deps import LazyFacts, Limits, MintDeps
from leasegate.control_plane.hops import authorise_hop
from leasegate.control_plane.idempotency import fingerprint, replay
from leasegate.control_plane.placement import (
    AFFINITY_WAIT_S,
    affinity_candidate,
    fair_share_refusal,
    owed_placement,
    turned_away,
)
from leasegate.control_plane.refusals import recorded
from leasegate.control_plane.residency import mint_residency
from leasegate.control_plane.views import mint_view
from leasegate.core.errors import GatewayError, PassOver
from leasegate.core.ports.storage import (
    AdminStateMoved,
    CitedDecisionSuperseded,
    DispatchLeaseHeld,
    IdempotencyKeyTaken,
    LeaseCapacityExhausted,
)
from leasegate.core.records import KeyRecord, MintDecision
from leasegate.keys import ParsedKey, hash_secret, new_key
from leasegate.routing.residency import Residency
from leasegate.routing.selection import NoneEligible, Selected
from leasegate.web.tracing import step
from leasegate.wire import MintAnswer, MintBody

_MAX_REDECISIONS = 3

View = MintAnswer


@dataclass(frozen=True, slots=True)
class Minted:
    status: int
    """201 for a new mint, 200 for an idempotent replay of one."""
    view: View


async def mint(deps: MintDeps, body: MintBody, idempotency_key: str | None = None) -> Minted:
    digest = fingerprint(body) if idempotency_key is not None else None
    start = start_of(body, idempotency_key, digest)
    asked = asked_of(body)
    if idempotency_key is not None:
        earlier = await deps.store.find_idempotent(body.tenant, idempotency_key)
        if earlier is not None:
            return await _replayed(deps, asked, start, earlier)
    try:
        answer = await _decide(deps, body, start)
        if isinstance(answer, Refusal):
            raise await recorded(deps, asked, answer)
        return Minted(201, answer)
    except IdempotencyKeyTaken:
        # a concurrent request with the same key recorded its decision first: answer as it
        if idempotency_key is None:  # only keyed mints can collide
            raise
        earlier = await deps.store.find_idempotent(body.tenant, idempotency_key)
        if earlier is None:
            raise
        return await _replayed(deps, asked, start, earlier)


async def _replayed(deps: MintDeps, asked: Asked, start: Start, earlier: MintDecision) -> Minted:
    answer = await replay(deps, start, earlier)
    if isinstance(answer, Refusal):
        raise await recorded(deps, asked, answer)
    return Minted(200, answer)


async def _decide(deps: MintDeps, body: MintBody, start: Start) -> View | Refusal:
    """The checks in SPEC order: shape, then the hop clauses, then the dispatch's lease."""
    if body.retry_of_mint_decision_id and body.supersedes_mint_decision_id:
        return Refusal(
            start,
            GatewayError(
                "citation-conflict",
                "retry_of_mint_decision_id and supersedes_mint_decision_id are mutually exclusive",
            ),
        )
    ttl_s = key_ttl(deps.limits, body.ttl_s)
    if isinstance(ttl_s, GatewayError):
        return Refusal(start, ttl_s)
    if start.cites is not None:
        hop = await authorise_hop(deps, body, start)
        if isinstance(hop, Refusal):
            return hop
        start = hop
    residency = mint_residency(deps.limits, body.tenant, start)
    if isinstance(residency, GatewayError):
        return Refusal(start, residency)
    candidates = deps.registry.candidates(body.model)
    if not candidates:
        unknown = GatewayError("model-not-served", "no account serves the requested model")
        return Refusal(start, unknown)
    held = await _held_while_chain_corrupt(deps, start) or await _held_over_budget(
        deps, body, start
    )
    if held is not None:
        return held
    return await _walk(deps, body, start, candidates, ttl_s, residency)


async def _held_while_chain_corrupt(deps: MintDeps, start: Start) -> Refusal | None:
    """Nothing fails open: an overlay that does not verify might hide a disabled account.
    Checked after every rejection that applies, so a bad request is never told to wait."""
    verdict = await deps.overlay.decided()
    if verdict.status != "corrupt":
        return None
    return Refusal(start, held_while_corrupt())


async def _held_over_budget(deps: MintDeps, body: MintBody, start: Start) -> Refusal | None:
    """`tenant-budget-exhausted` (held to the period's end) once the tenant's spend in the
    current period has reached its budget; from the same cached overlay as account states."""
    over_budget = await tenant_budget_refusal(deps.overlay, deps.spend, deps.clock, body.tenant)
    return None if over_budget is None else Refusal(start, over_budget)


async def _walk(
    deps: MintDeps,
    body: MintBody,
    start: Start,
    candidates: Sequence[Candidate],
    ttl_s: int,
    residency: Residency,
) -> View | Refusal:
    """Select from the start position, reading live facts only as far as the walk goes
    (`LazyFacts`); a reservation that finds the account full after all records it as passed
    over and walks on. The affinity's account, while eligible, is tried before the walk
    (`placement`); a selected mint is checked against the tenants' fair shares once."""
    position = start.position or 0
    affine = await affinity_candidate(deps, body, start, candidates)
    with step("mint.facts"):
        live = await LazyFacts.read(deps, candidates, position, residency)
    passed_over: tuple[PassOver, ...] = ()
    redecisions = 0
    follow, shared = affine, False
    miss: PassOver | None = None
    while True:
        with step("mint.selection"):
            hit = False
            if follow is not None:
                code = await live.affinity_code(follow, AFFINITY_WAIT_S)
                hit = code is None
                if code is not None:
                    miss, follow = PassOver(follow.account.id, code), None
            outcome: Selected | NoneEligible = (
                Selected(follow, ())
                if hit and follow is not None
                else await live.select(position, passed_over)
            )
        outcome, shared = await _placed_when_owed(deps, body, candidates, live, outcome, shared)
        if isinstance(outcome, NoneEligible):
            return await _no_eligible(deps, body, start, outcome)
        if not shared:
            shared = True
            over_share = await fair_share_refusal(
                deps, body, start, candidates, live, deps.clock.now()
            )
            if over_share is not None:
                return Refusal(start, over_share)
        chosen = outcome.candidate
        try:
            ceiling = live.ceiling(chosen)
            with step("mint.commit"):  # one transaction: reserve the lease, record, commit
                return await _commit(
                    deps,
                    body,
                    start,
                    outcome,
                    ttl_s,
                    live.facts.admin_revision,
                    ceiling=ceiling,
                    affinity_hit=hit,
                    affinity_miss=miss,
                )
        except AdminStateMoved:
            # an operator changed account state while this mint decided: decide again
            redecisions += 1
            if redecisions > _MAX_REDECISIONS:
                raise GatewayError(
                    "account-state-unavailable", "account state is changing: try again"
                ) from None
            deps.overlay.forget()
            # a disable or a tenant budget may have moved
            held = await _held_while_chain_corrupt(deps, start) or await _held_over_budget(
                deps, body, start
            )
            if held is not None:
                return held
            position, passed_over, follow = start.position or 0, (), affine
            live = await LazyFacts.read(deps, candidates, position, residency)
        except LeaseCapacityExhausted:
            if hit:  # the affinity's account filled meanwhile: the ordered walk, past it
                live.mark_full(chosen, ceiling)
                miss, follow = PassOver(chosen.account.id, _full_code(chosen, ceiling)), None
                continue
            # past the end of the candidates, the walk answers NoneEligible with these; the
            # account counts as holding the ceiling it was refused at (the walk may come
            # back to it past the spreading share, up to its whole ceiling)
            live.mark_full(chosen, ceiling)
            full = PassOver(chosen.account.id, _full_code(chosen, ceiling))
            passed_over = (*outcome.passed_over, full)
            position = chosen.position + 1


async def _placed_when_owed(
    deps: MintDeps,
    body: MintBody,
    candidates: Sequence[Candidate],
    live: LazyFacts,
    outcome: Selected | NoneEligible,
    shared: bool,
) -> tuple[Selected | NoneEligible, bool]:
    """A mint nobody has room for, of a tenant below its share: placed where a bucket
    refills within a second, past the whole ceiling if every account is at it, as far as the
    other tenants hold beyond their shares (`placement.owed_placement`), once per walk, and
    then past the fair-share check (it is owed the lease)."""
    if not isinstance(outcome, NoneEligible) or shared:
        return outcome, shared
    owed = await owed_placement(deps, body, candidates, live, outcome)
    return (outcome, shared) if owed is None else (owed, True)


async def _commit(
    deps: MintDeps,
    body: MintBody,
    start: Start,
    selected: Selected,
    ttl_s: int,
    admin_revision: int,
    *,
    ceiling: int | None,
    affinity_hit: bool = False,
    affinity_miss: PassOver | None = None,
) -> View | Refusal:
    now = deps.clock.now()
    candidate = selected.candidate
    if affinity_miss is not None and affinity_miss.account_id == candidate.account.id:
        affinity_miss = None  # the walk landed on the session's account after all: no miss
    token, parsed = new_key()
    chosen = Chosen(
        candidate.account.id,
        candidate.served_model,
        candidate.position,
        parsed.key_id,
        selected.passed_over,
        affinity_hit,
        affinity_miss,
    )
    decision = decision_of(deps.new_id("md"), now, asked_of(body), start, chosen)
    key = key_of(decision, parsed, ttl_s)
    try:
        await deps.store.commit_mint(
            decision,
            key,
            lease_capacity=ceiling,
            now=now,
            admin_revision=admin_revision,
        )
    except DispatchLeaseHeld:
        return Refusal(start, _lease_held())
    except CitedDecisionSuperseded:
        # a concurrent hop citing the same decision committed first: chains never branch
        return Refusal(
            start,
            GatewayError(
                "fallback-cited-decision-superseded",
                "the cited decision already has a successor",
            ),
        )
    deps.waiting.served(body.model, body.tenant, body.dispatch_id)  # it waits no more
    return mint_view(decision, token, key)


def _full_code(chosen: Candidate, ceiling: int | None) -> str:
    """Which ceiling the reservation found reached: the operator's, or the one the quota set
    below it (`quota-exhausted`)."""
    capacity = chosen.account.lease_capacity
    if ceiling is not None and (capacity is None or ceiling < capacity):
        return "quota-exhausted"
    return "lease-capacity-exhausted"


def _lease_held() -> GatewayError:
    return GatewayError(
        "dispatch-lease-held", "this dispatch already holds a live lease: revoke it first"
    )


async def _no_eligible(
    deps: MintDeps, body: MintBody, start: Start, outcome: NoneEligible
) -> Refusal:
    """`dispatch-lease-held` comes before selection's answer (SPEC order). A selected mint
    learns it from its commit (the UNIQUE live_dispatch column decides every race); only a
    mint nobody can serve needs this read, so the common path spends no round trip on it."""
    now = deps.clock.now()
    if await deps.store.live_key_of_dispatch(body.tenant, body.dispatch_id, now):
        return Refusal(start, _lease_held())
    # fair shares apply to the other tenants for a while
    window_s = deps.limits.fair_share_window_s
    deps.saturation.refused(body.model, body.tenant, now.timestamp(), window_s)
    return Refusal(
        start,
        GatewayError(
            "no-eligible-account",
            "no account can serve the requested model now",
            passed_over=outcome.passed_over,
            cooldown_scope=outcome.cooldown_scope,
            retry_after_s=turned_away(deps, body, start, now, outcome),
        ),
    )


def key_of(decision: MintDecision, parsed: ParsedKey, ttl_s: int) -> KeyRecord:
    """The key a selected decision hands out: its lease, on the decision's account."""
    if decision.account_id is None or decision.served_model is None:
        raise ValueError("only a selected decision hands out a key")
    return KeyRecord(
        key_id=parsed.key_id,
        secret_hash=hash_secret(parsed.secret),
        mint_decision_id=decision.id,
        tenant=decision.tenant,
        dispatch_id=decision.dispatch_id,
        model=decision.model,
        served_model=decision.served_model,
        account_id=decision.account_id,
        created_at=decision.created_at,
        expires_at=decision.created_at + timedelta(seconds=ttl_s),
        chain_id=decision.chain_id,
        budget_max_tokens=decision.budget_max_tokens,
        budget_max_cost=decision.budget_max_cost,
    )


def key_ttl(limits: Limits, requested: int | None) -> int | GatewayError:
    """The key's lifetime in seconds, or the refusal of one longer than allowed."""
    ttl = requested if requested is not None else limits.key_ttl_s
    if ttl > limits.key_max_ttl_s:
        return GatewayError("invalid-request", f"ttl_s must not exceed {limits.key_max_ttl_s}")
    return ttl
