"""The `/control/v2` HTTP surface: parse, authenticate, delegate, render. Nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from leasegate.control_plane import keys
from leasegate.control_plane.accounts import AccountsDeps, account_read, accounts_view
from leasegate.control_plane.admin import AdminDeps, admin_router
from leasegate.control_plane.callers import Callers, any_caller
from leasegate.control_plane.decisions import decision_read, dispatch_decisions, evidence_list
from leasegate.control_plane.deps import MintDeps
from leasegate.control_plane.mint import mint
from leasegate.control_plane.mint_metrics import MintMetrics
from leasegate.control_plane.paths import known_id, parse_since
from leasegate.control_plane.tenants import TenantDeps, tenants_router
from leasegate.control_plane.usage import UsageDeps, usage_router
from leasegate.core.errors import GatewayError
from leasegate.core.ids import DISPATCH_PART_PATTERN, RECORD_ID_PATTERN
from leasegate.core.ports.storage import DecisionEvidenceReader
from leasegate.core.records import MintKind
from leasegate.wire import AccountRead as AccountReadView
from leasegate.wire import (
    Accounts,
    Decision,
    DecisionList,
    EvidenceList,
    KeyInfo,
    MintAnswer,
    MintBody,
    RenewBody,
)

_ID_PATH = RECORD_ID_PATTERN  # no longer than an id column (it accepted 100 before)
_IDEMPOTENCY_KEY = r"^[\x21-\x7e]{1,200}$"  # printable ASCII, no spaces


@dataclass(frozen=True, slots=True)
class ControlDeps:
    """Each router's own collaborators, built once by the composition root
    (`runtime.ControlRuntime`); no router sees more than its own."""

    callers: Callers
    mint: MintDeps
    mint_metrics: MintMetrics
    records: DecisionEvidenceReader
    """Decisions and evidence, for their read routes."""
    accounts: AccountsDeps
    admin: AdminDeps
    usage: UsageDeps
    tenants: TenantDeps


def control_router(deps: ControlDeps) -> APIRouter:
    router = APIRouter(prefix="/control/v2", dependencies=[Depends(any_caller(deps.callers))])

    @router.post(
        "/keys",
        status_code=201,
        response_model=MintAnswer,
        responses={200: {"model": MintAnswer, "description": "an idempotent replay"}},
    )
    async def mint_key(
        body: MintBody,
        response: Response,
        idempotency_key: Annotated[str | None, Header(pattern=_IDEMPOTENCY_KEY)] = None,
    ) -> MintAnswer:
        try:
            minted = await mint(deps.mint, body, idempotency_key)
        except GatewayError as refusal:
            if refusal.mint_decision_id is not None:  # a refused decision was recorded
                deps.mint_metrics.decided(_kind(body), body.tenant, refusal.code)
            raise
        if minted.status == 201:  # a replay (200) answers with an already counted decision
            deps.mint_metrics.decided(_kind(body), body.tenant, None)
        response.status_code = minted.status
        return minted.view

    @router.delete("/keys/{key_id}", status_code=204)
    async def revoke_key(key_id: str) -> Response:
        known_id(key_id, "key-not-found")
        await keys.revoke(deps.mint, key_id)
        return Response(status_code=204)

    @router.post("/keys/{key_id}/renew", status_code=201)
    async def renew_key(key_id: str, request: Request) -> MintAnswer:
        known_id(key_id, "key-not-found")
        raw = await request.body()
        try:
            body = RenewBody.model_validate_json(raw) if raw.strip() else RenewBody()
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from None
        return await keys.renew(deps.mint, key_id, body.ttl_s)

    @router.get("/keys/{key_id}")
    async def read_key(key_id: str) -> KeyInfo:
        known_id(key_id, "key-not-found")
        return await keys.read(deps.mint, key_id)

    router.include_router(_record_routes(deps.records))
    router.include_router(_account_routes(deps.accounts))
    router.include_router(admin_router(deps.admin))
    router.include_router(usage_router(deps.usage))
    router.include_router(tenants_router(deps.tenants))
    return router


def _kind(body: MintBody) -> MintKind:
    if body.retry_of_mint_decision_id is not None:
        return "retry"
    return "supersede" if body.supersedes_mint_decision_id is not None else "fresh"


def _record_routes(records: DecisionEvidenceReader) -> APIRouter:
    """Decisions and evidence: read-only views."""
    router = APIRouter()

    @router.get("/decisions")
    async def list_decisions(
        tenant: Annotated[str, Query(pattern=DISPATCH_PART_PATTERN)],
        dispatch_id: Annotated[str, Query(pattern=DISPATCH_PART_PATTERN)],
    ) -> DecisionList:
        return DecisionList(decisions=await dispatch_decisions(records, tenant, dispatch_id))

    @router.get("/decisions/{decision_id}")
    async def read_decision(decision_id: str) -> Decision:
        known_id(decision_id, "decision-not-found")
        return await decision_read(records, decision_id)

    @router.get("/evidence")
    async def list_evidence(
        decision_id: Annotated[str | None, Query(pattern=_ID_PATH)] = None,
        account_id: Annotated[str | None, Query(pattern=_ID_PATH)] = None,
        since: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> EvidenceList:
        return await evidence_list(
            records,
            decision_id=decision_id,
            account_id=account_id,
            since=parse_since(since),
            limit=limit,
        )

    return router


def _account_routes(accounts: AccountsDeps) -> APIRouter:
    """The accounts view, whole or one account."""
    router = APIRouter()

    @router.get("/accounts")
    async def list_accounts() -> Accounts:
        return await accounts_view(accounts)

    @router.get("/accounts/{account_id}")
    async def read_account(account_id: str) -> AccountReadView:
        known_id(account_id, "account-not-found")
        view = await accounts_view(accounts, only=account_id)
        if not view.accounts:
            raise GatewayError("account-not-found", "no such account")
        return account_read(view)

    return router
