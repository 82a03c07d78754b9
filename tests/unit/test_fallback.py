"""Hop authorisation: one answer per input, rejections before holds, retries move forward."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.errors import CODES
from leasegate.core.ports.storage import EvidenceSummary
from leasegate.core.records import MintDecision
from leasegate.routing.fallback import (
    NO_EVIDENCE,
    Authorised,
    Citation,
    Lineage,
    Refused,
    authorise_fallback,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LINEAGE = Lineage("acme/web", "d-1", "gpt-4o")
FALLBACK = "gpt-4.1"
"""The cited model's declared context_fallback, where the tests pass one."""


def _decision(**overrides: object) -> MintDecision:
    base = MintDecision(
        id="md_cited",
        created_at=T0,
        tenant="acme/web",
        dispatch_id="d-1",
        model="gpt-4o",
        role=None,
        kind="fresh",
        outcome="selected",
        hop=0,
        fallback_position=0,
        account_id="a0",
        served_model="gpt-4o",
        key_id="k0",
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


decisions = st.one_of(
    st.none(),
    st.builds(
        _decision,
        tenant=st.sampled_from(["acme/web", "other"]),
        dispatch_id=st.sampled_from(["d-1", "d-2"]),
        model=st.sampled_from(["gpt-4o", "gpt-4o-mini"]),
        outcome=st.sampled_from(["selected", "refused"]),
        hop=st.integers(0, 5),
        fallback_position=st.one_of(st.none(), st.integers(0, 6)),
        kind=st.sampled_from(["fresh", "retry", "supersede", "renewal"]),
    ),
)
evidence = st.builds(
    EvidenceSummary,
    has_terminal=st.booleans(),
    qualifying_request_id=st.one_of(st.none(), st.just("req_q")),
    context_length_request_id=st.one_of(st.none(), st.just("req_ctx")),
).map(
    # a qualifying or context-length row is a terminal row
    lambda e: replace(
        e,
        has_terminal=e.has_terminal
        or e.qualifying_request_id is not None
        or e.context_length_request_id is not None,
    )
)
citations = st.builds(Citation, st.sampled_from(["retry", "supersede"]), st.just("md_cited"))
hops = st.integers(0, 5)


def _grown(before: EvidenceSummary, after: EvidenceSummary) -> EvidenceSummary:
    """Evidence only accumulates: rows are written, never taken back."""
    return EvidenceSummary(
        has_terminal=before.has_terminal or after.has_terminal,
        qualifying_request_id=before.qualifying_request_id or after.qualifying_request_id,
        context_length_request_id=before.context_length_request_id
        or after.context_length_request_id,
    )


@given(citations, decisions, evidence, st.booleans(), st.booleans(), hops)
def test_every_input_gets_exactly_one_well_formed_answer(
    citation: Citation,
    cited: MintDecision | None,
    found: EvidenceSummary,
    lease_live: bool,
    has_successor: bool,
    max_hops: int,
) -> None:
    answer = authorise_fallback(
        citation,
        cited,
        found,
        lease_live=lease_live,
        has_successor=has_successor,
        lineage=LINEAGE,
        max_hops=max_hops,
        context_fallback=FALLBACK,
    )
    assert isinstance(answer, Authorised) != isinstance(answer, Refused)
    if isinstance(answer, Refused):
        assert answer.code.startswith("fallback-")
        assert CODES[answer.code].disposition == answer.disposition
    else:
        assert cited is not None
        assert answer.hop <= max(max_hops, cited.hop)


lineages = st.sampled_from([LINEAGE, replace(LINEAGE, model=FALLBACK)])


@given(
    citations,
    decisions,
    evidence,
    st.booleans(),
    hops,
    evidence,
    st.booleans(),
    hops,
    lineages,
)
def test_a_rejection_stays_rejected_whatever_the_transient_facts(
    citation: Citation,
    cited: MintDecision | None,
    found: EvidenceSummary,
    has_successor: bool,
    max_hops: int,
    later: EvidenceSummary,
    lease_live: bool,
    other_hops: int,
    lineage: Lineage,
) -> None:
    """Lease, evidence and budget change over time; a rejected citation never turns admissible."""
    first = authorise_fallback(
        citation,
        cited,
        found,
        lease_live=True,
        has_successor=has_successor,
        lineage=lineage,
        max_hops=max_hops,
        context_fallback=FALLBACK,
    )
    if not (isinstance(first, Refused) and first.disposition == "rejected"):
        return
    again = authorise_fallback(
        citation,
        cited,
        _grown(found, later),
        lease_live=lease_live,
        has_successor=has_successor,
        lineage=lineage,
        max_hops=other_hops,
        context_fallback=FALLBACK,
    )
    assert again == first


@given(citations, decisions, evidence, st.booleans(), st.booleans(), hops, hops, lineages)
def test_a_hold_never_hides_a_rejection(
    citation: Citation,
    cited: MintDecision | None,
    found: EvidenceSummary,
    has_successor: bool,
    lease_live: bool,
    max_hops: int,
    other_hops: int,
    lineage: Lineage,
) -> None:
    """With the evidence fixed, clearing the lease or raising the budget never reveals a
    rejection that was there all along: rejections are answered first."""
    first = authorise_fallback(
        citation,
        cited,
        found,
        lease_live=lease_live,
        has_successor=has_successor,
        lineage=lineage,
        max_hops=max_hops,
        context_fallback=FALLBACK,
    )
    if not (isinstance(first, Refused) and first.disposition == "held") or cited is None:
        return
    later = authorise_fallback(
        citation,
        cited,
        found,
        lease_live=False,
        has_successor=has_successor,
        lineage=lineage,
        max_hops=other_hops,
        context_fallback=FALLBACK,
    )
    assert not (isinstance(later, Refused) and later.disposition == "rejected")


@given(decisions, evidence, hops, st.sampled_from([LINEAGE, replace(LINEAGE, model=FALLBACK)]))
def test_only_a_context_length_row_licenses_the_fallback_model(
    cited: MintDecision | None, found: EvidenceSummary, max_hops: int, lineage: Lineage
) -> None:
    """A hop may change model only to the cited model's context_fallback, only on a
    context-length-exceeded row, from the top of that model's list; the same model never
    hops on such a row."""
    answer = authorise_fallback(
        Citation("retry", "md_cited"),
        cited,
        found,
        lease_live=False,
        has_successor=False,
        lineage=lineage,
        max_hops=max_hops,
        context_fallback=FALLBACK,
    )
    if cited is None or not isinstance(answer, Authorised):
        return
    if lineage.model == FALLBACK:
        assert cited.model != FALLBACK  # FALLBACK is what the cited model declared
        assert answer.authorised_by == found.context_length_request_id == "req_ctx"
        assert (answer.start_position, answer.hop) == (0, cited.hop + 1)
        assert answer.hop <= max_hops
    else:
        assert found.context_length_request_id is None


@given(decisions, evidence, hops)
def test_an_authorised_retry_starts_past_the_cited_position(
    cited: MintDecision | None, found: EvidenceSummary, max_hops: int
) -> None:
    answer = authorise_fallback(
        Citation("retry", "md_cited"),
        cited,
        found,
        lease_live=False,
        has_successor=False,
        lineage=LINEAGE,
        max_hops=max_hops,
    )
    if isinstance(answer, Authorised):
        assert cited is not None
        assert cited.fallback_position is not None
        assert answer.start_position == cited.fallback_position + 1
        assert answer.hop == cited.hop + 1 <= max_hops
        assert found.qualifying_request_id is not None
        assert answer.authorised_by == found.qualifying_request_id


@given(decisions, evidence, hops)
def test_supersede_keeps_position_and_hop_and_uses_no_budget(
    cited: MintDecision | None, found: EvidenceSummary, max_hops: int
) -> None:
    answer = authorise_fallback(
        Citation("supersede", "md_cited"),
        cited,
        found,
        lease_live=False,
        has_successor=False,
        lineage=LINEAGE,
        max_hops=max_hops,
    )
    if isinstance(answer, Authorised):
        assert cited is not None
        assert (answer.start_position, answer.hop) == (cited.fallback_position, cited.hop)
        assert answer.authorised_by is None
    elif cited is not None and cited.outcome == "selected" and cited.fallback_position is not None:
        lineage = (cited.tenant, cited.dispatch_id, cited.model)
        if lineage == (LINEAGE.tenant, LINEAGE.dispatch_id, LINEAGE.model):
            # the budget never refuses a supersede; only evidence of a delivered key does
            assert answer.code == "fallback-response-was-not-lost"
            assert found.has_terminal


def _answer(**overrides: object) -> Authorised | Refused:
    arguments: dict[str, object] = {
        "citation": Citation("retry", "md_cited"),
        "cited": _decision(),
        "evidence": EvidenceSummary(has_terminal=True, qualifying_request_id="req_q"),
        "lease_live": False,
        "has_successor": False,
        "lineage": LINEAGE,
        "max_hops": 1,
        **overrides,
    }
    return authorise_fallback(**arguments)  # type: ignore[arg-type]


def test_clauses_in_spec_order() -> None:
    """Each step below breaks one more clause, each earlier than the one before it."""
    everything_wrong = {
        "citation": Citation("supersede", "md_cited"),
        "evidence": EvidenceSummary(has_terminal=True, qualifying_request_id=None),
        "lease_live": True,
        "has_successor": True,
        "lineage": Lineage("acme/web", "d-2", "gpt-4o"),
    }
    assert _answer(cited=None, **everything_wrong) == Refused("fallback-lineage-unknown", "held")
    refused = _decision(outcome="refused", fallback_position=None)
    assert _answer(cited=refused, **everything_wrong) == Refused(
        "fallback-cited-decision-not-selected", "rejected"
    )
    assert _answer(**everything_wrong) == Refused("fallback-lineage-mismatch", "rejected")
    del everything_wrong["lineage"]
    assert _answer(**everything_wrong) == Refused("fallback-cited-decision-superseded", "rejected")
    del everything_wrong["has_successor"]
    assert _answer(**everything_wrong) == Refused("fallback-response-was-not-lost", "rejected")
    del everything_wrong["citation"]
    assert _answer(**everything_wrong) == Refused("fallback-lease-still-held", "held")
    del everything_wrong["lease_live"]
    assert _answer(**everything_wrong) == Refused("fallback-not-authorised", "held")
    assert _answer(cited=_decision(hop=1)) == Refused("fallback-budget-exhausted", "held")
    assert _answer(max_hops=0) == Refused("fallback-budget-exhausted", "held")
    assert _answer() == Authorised(1, 1, "req_q")


def test_the_context_fallback_clauses() -> None:
    too_long = EvidenceSummary(
        has_terminal=True, qualifying_request_id=None, context_length_request_id="req_ctx"
    )
    to_fallback = replace(LINEAGE, model=FALLBACK)
    # the same model again: rejected, whatever else holds
    assert _answer(evidence=too_long, lease_live=True) == Refused(
        "fallback-context-length-exceeded", "rejected"
    )
    # the declared fallback: authorised from the top of its list, one hop spent
    assert _answer(evidence=too_long, lineage=to_fallback, context_fallback=FALLBACK) == (
        Authorised(0, 1, "req_ctx")
    )
    assert _answer(
        evidence=too_long, lineage=to_fallback, context_fallback=FALLBACK, max_hops=0
    ) == Refused("fallback-budget-exhausted", "held")
    # another model, or none declared: lineage-mismatch; no context-length row (yet): held
    assert _answer(evidence=too_long, lineage=to_fallback) == Refused(
        "fallback-lineage-mismatch", "rejected"
    )
    assert _answer(lineage=to_fallback, context_fallback=FALLBACK) == Refused(
        "fallback-not-authorised", "held"
    )
    supersede = Citation("supersede", "md_cited")
    assert _answer(
        citation=supersede, lineage=to_fallback, context_fallback=FALLBACK, evidence=NO_EVIDENCE
    ) == Refused("fallback-lineage-mismatch", "rejected")


def test_supersede_needs_no_evidence_and_no_budget() -> None:
    answer = _answer(
        citation=Citation("supersede", "md_cited"),
        cited=_decision(fallback_position=2, hop=1),
        evidence=NO_EVIDENCE,
        max_hops=0,
    )
    assert answer == Authorised(2, 1, None)
