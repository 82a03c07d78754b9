"""The console's read pages: Dispatches (the recent ones, or one dispatch's chain), Evidence
and Audit, over the control plane's stores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast, get_args

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from leasegate.control_plane.console.deps import ConsoleDeps, ConsoleRecords
from leasegate.control_plane.console.web import ConsoleAuth, console_router, page
from leasegate.control_plane.decisions import dispatch_decisions
from leasegate.control_plane.views import evidence_view
from leasegate.core.clock import Clock, iso
from leasegate.core.ids import DISPATCH_PART
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.witness import Witness
from leasegate.core.records import RENEWED, REVOKED, DecisionOutcome, KeyRecord, Outcome

OUTCOMES: tuple[str, ...] = get_args(Outcome)
DECISION_OUTCOMES: tuple[str, ...] = get_args(DecisionOutcome)
DISPATCH_ROWS = 100
DEFAULT_WINDOW = "1h"
_EVIDENCE_ROWS = 100


@dataclass(frozen=True, slots=True)
class Window:
    span: timedelta
    bucket_s: int | None
    """The Traffic page's bar in seconds (30 to 60 bars); None: not charted there (a chart
    reads every evidence row of its range: a week would cost seven days' rows)."""


WINDOWS = {
    "15m": Window(timedelta(minutes=15), 30),
    "1h": Window(timedelta(hours=1), 60),
    "24h": Window(timedelta(days=1), 1800),
    "7d": Window(timedelta(days=7), None),
}
"""The time ranges of the evidence, dispatches and traffic pages (within the last ...)."""


@dataclass(frozen=True, slots=True)
class LifeEvent:
    what: str
    """minted, renewed, revoked, expired, or `live until`."""
    at: str
    detail: str | None = None


def key_life(key: KeyRecord, now: datetime) -> list[LifeEvent]:
    """A key's life as the rows tell it: minted, then how (and whether) it ended."""
    events = [LifeEvent("minted", iso(key.created_at))]
    if key.revoked_at is not None:
        if key.revoke_reason == RENEWED:
            events.append(LifeEvent("renewed", iso(key.revoked_at)))
        else:
            reason = key.revoke_reason if key.revoke_reason != REVOKED else None
            events.append(LifeEvent("revoked", iso(key.revoked_at), reason))
    elif key.expires_at <= now:
        events.append(LifeEvent("expired", iso(key.expires_at)))
    else:
        events.append(LifeEvent("live until", iso(key.expires_at)))
    return events


def read_pages(deps: ConsoleDeps, auth: ConsoleAuth) -> APIRouter:
    router = console_router()

    @router.get("/dispatches")
    async def dispatches(
        request: Request,
        tenant: str = "",
        dispatch_id: str = "",
        decision: str = "",
        outcome: str = "",
        within: str = "",
    ) -> Response:
        session = await auth.session(request)
        if decision and DISPATCH_PART.fullmatch(decision):
            # an evidence row's decision id: its dispatch's whole chain
            found = await deps.records.get_decision(decision)
            if found is not None:
                tenant = found.tenant
                dispatch_id = found.dispatch_id
        filters = {"tenant": tenant, "outcome": outcome, "within": within or DEFAULT_WINDOW}
        context: dict[str, Any] = {
            "nav": "dispatches",
            "tenant": tenant,
            "dispatch_id": dispatch_id,
            "chain": None,
            "recent": None,
            "error": None,
            "filters": filters,
            "outcomes": DECISION_OUTCOMES,
            "windows": tuple(WINDOWS),
            "limit": DISPATCH_ROWS,
        }
        if dispatch_id:  # one dispatch's chain
            if not (DISPATCH_PART.fullmatch(tenant) and DISPATCH_PART.fullmatch(dispatch_id)):
                context["error"] = "Give both a tenant and a dispatch id (letters, digits, ._:/@-)."
                return page(request, "dispatches.html", context, session=session, status=400)
            context["chain"] = await dispatch_chain(deps.records, deps.clock, tenant, dispatch_id)
            return page(request, "dispatches.html", context, session=session)
        if (
            (tenant and not DISPATCH_PART.fullmatch(tenant))
            or outcome not in ("", *DECISION_OUTCOMES)
            or filters["within"] not in WINDOWS
        ):
            context["error"] = (
                "Pick the outcome and time range from the lists (a tenant: letters, digits, "
                "._:/@-)."
            )
            return page(request, "dispatches.html", context, session=session, status=400)
        now = deps.clock.now()
        context["recent"] = await deps.browse.recent_dispatches(
            now - WINDOWS[filters["within"]].span,
            now + timedelta(microseconds=1),
            tenant=tenant or None,
            outcome=cast("DecisionOutcome", outcome) if outcome else None,
            limit=DISPATCH_ROWS,
        )
        return page(request, "dispatches.html", context, session=session)

    @router.get("/evidence")
    async def evidence(
        request: Request, account: str = "", model: str = "", outcome: str = "", within: str = ""
    ) -> Response:
        session = await auth.session(request)
        store = deps.records
        accounts = [a.id for a in deps.registry.accounts]
        models = list(dict.fromkeys(m for a in deps.registry.accounts for m in a.models.values()))
        # Only values the filters offer: anything else is an unknown filter, not a query.
        if (
            account not in ("", *accounts)
            or model not in ("", *models)
            or outcome not in ("", *OUTCOMES)
            or within not in ("", *WINDOWS)
        ):
            return page(
                request,
                "message.html",
                {"title": "Unknown filter", "text": "Pick the filters from the lists."},
                session=session,
                status=400,
            )
        rows = await store.query_evidence(
            account_id=account or None,
            served_model=model or None,
            outcome=outcome or None,
            since=deps.clock.now() - WINDOWS[within].span if within else None,
            limit=_EVIDENCE_ROWS,
        )
        now = deps.clock.now()
        counts = {
            window: await store.outcome_counts(now - timedelta(minutes=window))
            for window in (5, 60)
        }
        context = {
            "nav": "evidence",
            "rows": [evidence_view(r).model_dump(mode="json") for r in rows],
            "counts": counts,
            "outcomes": OUTCOMES,
            "accounts": accounts,
            "models": models,
            "windows": tuple(WINDOWS),
            "filters": {"account": account, "model": model, "outcome": outcome, "within": within},
        }
        return page(request, "evidence.html", context, session=session)

    @router.get("/audit")
    async def audit(request: Request) -> Response:
        session = await auth.session(request)
        verdict, snapshot = await deps.overlay.read_full()
        witness: Witness | None
        try:
            witness = await deps.witness.read()
            witness_error = None
        except StoreError as exc:
            witness, witness_error = None, exc.reason
        context = {
            "nav": "audit",
            "verdict": verdict,
            "records": list(reversed(snapshot.records)),
            "witness": witness,
            "witness_error": witness_error,
        }
        return page(request, "audit.html", context, session=session)

    return router


async def dispatch_chain(
    records: ConsoleRecords, clock: Clock, tenant: str, dispatch_id: str
) -> list[dict[str, Any]]:
    """Each decision of the dispatch with its evidence rows and its key's life."""
    found = await dispatch_decisions(records, tenant, dispatch_id)
    decisions = [d.model_dump(mode="json") for d in found]  # as the API serves them
    now = clock.now()
    for decision in decisions:
        key_id = decision["key_id"]
        key = await records.get_key(key_id) if key_id else None
        decision["key_life"] = key_life(key, now) if key is not None else []
    return decisions
