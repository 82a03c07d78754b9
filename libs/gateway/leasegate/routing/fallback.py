"""Hop authorisation: may a mint that cites a prior decision move down the candidate list?

Pure and total: every input gets exactly one answer, `Authorised` or `Refused`. The clauses run
in SPEC §3 order, every rejection before every hold, so a citation that is inadmissible on its
face is never first answered with a transient a retry loop would hammer:

    fallback-lineage-unknown              held      no such decision
    fallback-cited-decision-not-selected  rejected  the cited mint was refused: no lease to move on
    fallback-lineage-mismatch             rejected  other tenant or dispatch, or another model
                                                    than the cited one or (retry) its declared
                                                    context_fallback
    fallback-cited-decision-superseded    rejected  it already has a successor: chains never branch
    fallback-response-was-not-lost        rejected  supersede, but its key reached an upstream
    fallback-context-length-exceeded      rejected  retry of the same model whose cited row says
                                                    the context window was exceeded: every
                                                    account of it would fail the same way
    fallback-lease-still-held             held      its lease is live: revoke first
    fallback-not-authorised               held      retry without a qualifying terminal row (a
                                                    context-fallback hop: without a
                                                    context-length-exceeded row)
    fallback-budget-exhausted             held      retry past the hop ceiling

The verdict is only ever a start position and a hop: the candidate list is recomputed by the
caller from the request's model, and every live filter still applies at every position. The
one hop that changes model, to the cited model's `context_fallback`, starts that model's list
at position 0 and spends one hop like any other retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leasegate.core.envelope import Disposition
from leasegate.core.ports.storage import EvidenceSummary
from leasegate.core.records import MintDecision

CitationKind = Literal["retry", "supersede"]


@dataclass(frozen=True, slots=True)
class Citation:
    kind: CitationKind
    decision_id: str


@dataclass(frozen=True, slots=True)
class Lineage:
    """The new request's `(tenant, dispatch_id, effective model)`."""

    tenant: str
    dispatch_id: str
    model: str


NO_EVIDENCE = EvidenceSummary(has_terminal=False, qualifying_request_id=None)


@dataclass(frozen=True, slots=True)
class Authorised:
    start_position: int
    hop: int
    authorised_by: str | None
    """The qualifying row's request id for a retry; None for a supersede."""


@dataclass(frozen=True, slots=True)
class Refused:
    code: str
    disposition: Disposition


def authorise_fallback(
    citation: Citation,
    cited: MintDecision | None,
    evidence: EvidenceSummary,
    *,
    lease_live: bool,
    has_successor: bool,
    lineage: Lineage,
    max_hops: int,
    context_fallback: str | None = None,
) -> Authorised | Refused:
    """The first clause that applies answers; past all of them the hop is authorised.
    `context_fallback`: the cited model's declared fallback, if any."""
    if cited is None:
        return Refused("fallback-lineage-unknown", "held")
    if cited.outcome != "selected" or cited.fallback_position is None:
        return Refused("fallback-cited-decision-not-selected", "rejected")
    to_fallback = (
        citation.kind == "retry"
        and context_fallback is not None
        and lineage.model == context_fallback != cited.model
    )
    if (cited.tenant, cited.dispatch_id) != (lineage.tenant, lineage.dispatch_id) or (
        cited.model != lineage.model and not to_fallback
    ):
        return Refused("fallback-lineage-mismatch", "rejected")
    if has_successor:
        return Refused("fallback-cited-decision-superseded", "rejected")
    if citation.kind == "supersede" and evidence.has_terminal:
        return Refused("fallback-response-was-not-lost", "rejected")
    if citation.kind == "retry" and not to_fallback and evidence.context_length_request_id:
        return Refused("fallback-context-length-exceeded", "rejected")
    if lease_live:
        return Refused("fallback-lease-still-held", "held")
    if citation.kind == "supersede":
        # recovering a lost response: the same place in the list, no budget spent
        return Authorised(cited.fallback_position, cited.hop, None)
    licence = evidence.context_length_request_id if to_fallback else evidence.qualifying_request_id
    if licence is None:
        return Refused("fallback-not-authorised", "held")
    if cited.hop + 1 > max_hops:
        return Refused("fallback-budget-exhausted", "held")
    if to_fallback:
        return Authorised(0, cited.hop + 1, licence)  # another model: its list from the top
    # past the account whose failure licensed the hop: it can never be re-selected
    return Authorised(cited.fallback_position + 1, cited.hop + 1, licence)
