"""Reading a dispatch's decisions: how a caller that lost a mint response finds its decision."""

from __future__ import annotations

from leasegate.control_plane.views import decision_view
from leasegate.core.ports.storage import DecisionEvidenceReader
from leasegate.wire import Decision


async def dispatch_decisions(
    store: DecisionEvidenceReader, tenant: str, dispatch_id: str
) -> tuple[Decision, ...]:
    """Every decision of `(tenant, dispatch_id)`, oldest first, each with its evidence rows."""
    decisions = await store.decisions_for_dispatch(tenant, dispatch_id)
    evidence = await store.evidence_for_decisions([d.id for d in decisions])
    return tuple(decision_view(d, evidence.get(d.id, [])) for d in decisions)
