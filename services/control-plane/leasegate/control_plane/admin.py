"""Operators' routes: change an account's admin state (admin tokens only), read the chain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request

from leasegate.accounts import Registry
from leasegate.audit import AuditRecord
from leasegate.control_plane.accounts import AccountsDeps, account_read, accounts_view
from leasegate.control_plane.callers import Callers, admin_caller
from leasegate.control_plane.deps import RevocationPublisher, announce_revoked
from leasegate.control_plane.overlay import AdminOverlay, StateChange
from leasegate.control_plane.paths import known_id
from leasegate.control_plane.views import record_view
from leasegate.core.errors import GatewayError
from leasegate.core.records import KeyRecord
from leasegate.wire import AccountStateChanged, AuditReport, StateBody


@dataclass(frozen=True, slots=True)
class AdminDeps:
    """What the operators' routes use: who may call, the overlay they append to and read,
    the registry, the revocation bus and the accounts view a change answers with."""

    callers: Callers
    overlay: AdminOverlay
    registry: Registry
    revocations: RevocationPublisher
    accounts: AccountsDeps


def admin_router(deps: AdminDeps) -> APIRouter:
    admin = admin_caller(deps.callers)
    router = APIRouter()

    # As a route dependency it runs before the body is validated: a control token gets 403.
    @router.post("/accounts/{account_id}/state", dependencies=[Depends(admin)])
    async def set_state(
        account_id: str,
        body: StateBody,
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
    ) -> AccountStateChanged:
        caller = await admin(request, authorization)
        known_id(account_id, "account-not-found")
        if deps.registry.account(account_id) is None:
            raise GatewayError("account-not-found", "no such account")
        change = StateChange(
            account_id=account_id,
            state=body.state,
            expected_revision=body.expected_revision,
            reason=body.reason,
            actor=caller.name,
            on_behalf_of=body.on_behalf_of,
        )
        record, revoked = await change_state(deps, change)
        view = account_read(await accounts_view(deps.accounts, only=account_id))
        return AccountStateChanged(
            **dict(view), revoked_keys=len(revoked), record=record_view(record)
        )

    @router.get("/audit")
    async def read_audit() -> AuditReport:
        verdict, snapshot = await deps.overlay.read_full()
        return AuditReport(
            chain=verdict.status,
            revision=verdict.revision,
            first_bad_seq=verdict.first_bad_seq,
            problem=verdict.problem,
            records=tuple(record_view(r) for r in snapshot.records),
        )

    return router


async def change_state(deps: AdminDeps, change: StateChange) -> tuple[AuditRecord, list[KeyRecord]]:
    """Append the change to the chain and tell every proxy about the keys it revoked.
    The one path for the API and the console alike."""
    record, revoked = await deps.overlay.mutate(change)
    await announce_revoked(deps.revocations, revoked)
    return record, revoked
