"""Hop authorisation: may a mint that cites a prior decision move down the candidate list?

Pure and total: every input gets exactly one answer, `Authorised` or `Refused`. The clauses run
in SPEC §3 order, every rejection before every hold, so a citation that is inadmissible on its
face is never first answered with a transient a retry loop would hammer:

    fallback-lineage-unknown              held      no such decision
    fallback-cited-decision-not-selected  rejected  the cited mint was refused: no lease to move on
    fallback-lineage-mismatch             rejected  other tenant, dispatch or effective model
    fallback-cited-decision-superseded    rejected  it already has a successor: chains never branch
    fallback-response-was-not-lost        rejected  supersede, but its key reached an upstream
    fallback-lease-still-held             held      its lease is live: revoke first
    fallback-not-authorised               held      retry without a qualifying terminal row
    fallback-budget-exhausted             held      retry past the hop ceiling

The verdict is only ever a start position and a hop: the candidate list is recomputed by the
caller from the same model, and every live filter still applies at every position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leasegate.core.errors import Disposition
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


@dataclass(frozen=True, slots=True)
class EvidenceSummary:
    """What the proxy has recorded for the cited decision's key."""

    has_terminal: bool
    """Any terminal row at all: the key reached the proxy, so the mint response was not lost."""
    qualifying_request_id: str | None
    """The first row whose outcome qualifies for a hop (SPEC §4), or None."""


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
) -> Authorised | Refused:
    """The first clause that applies answers; past all of them the hop is authorised."""
    if cited is None:
        return Refused("fallback-lineage-unknown", "held")
    if cited.outcome != "selected" or cited.fallback_position is None:
        return Refused("fallback-cited-decision-not-selected", "rejected")
    if (cited.tenant, cited.dispatch_id, cited.model) != (
        lineage.tenant,
        lineage.dispatch_id,
        lineage.model,
    ):
        return Refused("fallback-lineage-mismatch", "rejected")
    if has_successor:
        return Refused("fallback-cited-decision-superseded", "rejected")
    if citation.kind == "supersede" and evidence.has_terminal:
        return Refused("fallback-response-was-not-lost", "rejected")
    if lease_live:
        return Refused("fallback-lease-still-held", "held")
    if citation.kind == "supersede":
        # recovering a lost response: the same place in the list, no budget spent
        return Authorised(cited.fallback_position, cited.hop, None)
    if evidence.qualifying_request_id is None:
        return Refused("fallback-not-authorised", "held")
    if cited.hop + 1 > max_hops:
        return Refused("fallback-budget-exhausted", "held")
    # past the account whose failure licensed the hop: it can never be re-selected
    return Authorised(cited.fallback_position + 1, cited.hop + 1, evidence.qualifying_request_id)
