"""A mint that cites a prior decision: gather the facts, ask `authorise_fallback`, answer.

The verdict is pure (`routing.fallback`); this module only reads what it needs (the cited
decision, its evidence summary, its key) and answers with the Start the hop walks from, or
the hop's `Refusal` for the mint to record.
"""

from __future__ import annotations

from dataclasses import replace

from leasegate.control_plane.decision import Refusal, Start
from leasegate.control_plane.deps import MintDeps
from leasegate.core.errors import GatewayError
from leasegate.core.records import MintDecision
from leasegate.routing.fallback import (
    NO_EVIDENCE,
    Authorised,
    Citation,
    CitationKind,
    Lineage,
    authorise_fallback,
)
from leasegate.wire import MintBody

HOLD_RETRY_AFTER_S: dict[str, float] = {
    # the caller revokes, or the proxy's buffered evidence row lands: a second is plenty
    "fallback-lease-still-held": 1.0,
    "fallback-not-authorised": 1.0,
    # a lagging read or a restart: rarely cured by waiting, so do not invite hammering
    "fallback-lineage-unknown": 5.0,
    # only an operator raising LEASEGATE_MAX_FALLBACK_HOPS cures it
    "fallback-budget-exhausted": 30.0,
}

_MESSAGES = {
    "fallback-lineage-unknown": "the cited decision is unknown",
    "fallback-cited-decision-not-selected": "the cited decision never took a lease",
    "fallback-lineage-mismatch": "the cited decision belongs to another tenant, dispatch or model",
    "fallback-cited-decision-superseded": "the cited decision already has a successor",
    "fallback-response-was-not-lost": "the cited decision's key already reached the proxy",
    "fallback-context-length-exceeded": (
        "the cited request exceeded the model's context window: every account of it would "
        "fail the same way; hop to the model's context_fallback instead"
    ),
    "fallback-lease-still-held": "the cited decision's lease is still live: revoke it first",
    "fallback-not-authorised": "no qualifying terminal evidence for the cited decision (yet)",
    "fallback-budget-exhausted": "this hop would exceed LEASEGATE_MAX_FALLBACK_HOPS",
}


async def authorise_hop(deps: MintDeps, body: MintBody, start: Start) -> Start | Refusal:
    """The Start an authorised hop walks from, or the hop's refusal."""
    if start.cites is None:
        return start  # nothing cited: a fresh mint
    kind: CitationKind = "supersede" if start.kind == "supersede" else "retry"
    store = deps.store
    cited = await store.get_decision(start.cites)
    lease_live = False
    evidence = NO_EVIDENCE
    if cited is not None:
        evidence = await store.evidence_summary(cited.id)
        lease_live = await _lease_live(deps, cited)
    verdict = authorise_fallback(
        Citation(kind, start.cites),
        cited,
        evidence,
        lease_live=lease_live,
        has_successor=cited is not None and cited.successor_id is not None,
        lineage=Lineage(body.tenant, body.dispatch_id, body.model),
        max_hops=deps.limits.max_fallback_hops,
        context_fallback=deps.registry.context_fallback(cited.model) if cited else None,
    )
    if isinstance(verdict, Authorised):
        return _continue_chain(
            body,
            replace(
                start,
                position=verdict.start_position,
                hop=verdict.hop,
                authorised_by=verdict.authorised_by,
            ),
            cited,
        )
    extra: dict[str, object] = {}
    if cited is not None and cited.successor_id is not None:
        extra["successor_mint_decision_id"] = cited.successor_id
    error = GatewayError(
        verdict.code,
        _MESSAGES[verdict.code],
        disposition=verdict.disposition,
        retry_after_s=HOLD_RETRY_AFTER_S.get(verdict.code),
        extra=extra,
    )
    return Refusal(_attempted(start, kind, cited), error)


def _continue_chain(body: MintBody, start: Start, cited: MintDecision | None) -> Start | Refusal:
    """An authorised hop continues the cited decision's chain, and spends its budget."""
    if cited is None:  # authorise_fallback never authorises an unknown decision
        return start
    chained = replace(
        start,
        chain_id=cited.chain_id or cited.id,
        budget_max_tokens=cited.budget_max_tokens,
        budget_max_cost=cited.budget_max_cost,
        allowed_providers=cited.allowed_providers,
        allowed_regions=cited.allowed_regions,
    )
    if _names_another(body.allowed_providers, cited.allowed_providers) or _names_another(
        body.allowed_regions, cited.allowed_regions
    ):
        refusal = GatewayError(
            "invalid-request",
            "a hop keeps its chain's allowed_providers and allowed_regions: send none, or the same",
        )
        return Refusal(chained, refusal)
    if body.budget is not None and (
        body.budget.max_tokens != cited.budget_max_tokens
        or body.budget.cost != cited.budget_max_cost
    ):
        refusal = GatewayError(
            "invalid-request", "a hop shares its chain's budget: send none, or the same one"
        )
        return Refusal(chained, refusal)
    return chained


def _names_another(asked: tuple[str, ...] | None, chain: tuple[str, ...] | None) -> bool:
    return asked is not None and (chain is None or set(asked) != set(chain))


async def _lease_live(deps: MintDeps, cited: MintDecision) -> bool:
    if cited.key_id is None:
        return False
    key = await deps.store.get_key(cited.key_id)
    return key is not None and key.state(deps.clock.now()) == "live"


def _attempted(start: Start, kind: CitationKind, cited: MintDecision | None) -> Start:
    """What a refused hop would have been, for its decision record."""
    if cited is None or cited.fallback_position is None:
        return replace(start, position=None)
    if kind == "supersede":
        return replace(start, position=cited.fallback_position, hop=cited.hop)
    return replace(start, position=cited.fallback_position + 1, hop=cited.hop + 1)
