"""Reading decisions and evidence: how a caller that lost a mint response finds its decision,
and what the proxies recorded. Over the `DecisionEvidenceReader` port only."""

from __future__ import annotations

from datetime import datetime

from leasegate.control_plane.views import decision_view, evidence_view
from leasegate.core.errors import GatewayError
from leasegate.core.ports.storage import DecisionEvidenceReader
from leasegate.wire import Decision, EvidenceList


async def dispatch_decisions(
    store: DecisionEvidenceReader, tenant: str, dispatch_id: str
) -> tuple[Decision, ...]:
    """Every decision of `(tenant, dispatch_id)`, oldest first, each with its evidence rows."""
    decisions = await store.decisions_for_dispatch(tenant, dispatch_id)
    evidence = await store.evidence_for_decisions([d.id for d in decisions])
    return tuple(decision_view(d, evidence.get(d.id, [])) for d in decisions)


async def decision_read(store: DecisionEvidenceReader, decision_id: str) -> Decision:
    """One decision with its evidence rows, newest first; `decision-not-found` otherwise."""
    decision = await store.get_decision(decision_id)
    if decision is None:
        raise GatewayError("decision-not-found", "no such decision")
    evidence = await store.evidence_for_decisions([decision_id])
    return decision_view(decision, evidence.get(decision_id, []))


async def evidence_list(
    store: DecisionEvidenceReader,
    *,
    decision_id: str | None = None,
    account_id: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> EvidenceList:
    """Evidence rows, newest first, filtered by decision, account and start."""
    rows = await store.query_evidence(
        decision_id=decision_id, account_id=account_id, since=since, limit=limit
    )
    return EvidenceList(evidence=tuple(evidence_view(row) for row in rows))
