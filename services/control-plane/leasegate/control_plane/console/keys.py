"""The console's Keys page: every live key (never its secret or hash), by tenant and account,
and a Revoke button that ends a key through the API's own revocation (`keys.revoke`: the
store's single revoke seam, then the fan-out that tells every proxy)."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from leasegate.control_plane import keys
from leasegate.control_plane.console.deps import ConsoleDeps
from leasegate.control_plane.console.web import (
    ConsoleAuth,
    acting_form,
    console_router,
    message,
    page,
    unknown_filter,
)
from leasegate.core.errors import GatewayError
from leasegate.core.ids import DISPATCH_PART, RECORD_ID
from leasegate.core.ports.storage import KeyReader
from leasegate.core.records import KeyRecord

log = logging.getLogger("leasegate.console")

KEY_ROWS = 200


def key_pages(deps: ConsoleDeps, auth: ConsoleAuth) -> APIRouter:
    router = console_router()

    @router.get("/keys")
    async def live_keys(
        request: Request, tenant: str = "", account: str = "", revoked: str = ""
    ) -> Response:
        session = await auth.session(request)
        accounts = [a.id for a in deps.registry.accounts]
        if (tenant and not DISPATCH_PART.fullmatch(tenant)) or account not in ("", *accounts):
            return unknown_filter(request, session, "Tenant: letters, digits, ._:/@-.")
        found = await deps.browse.live_keys(
            deps.clock.now(),
            tenant=tenant or None,
            account_id=account or None,
            limit=KEY_ROWS,
        )
        context = {
            "nav": "keys",
            "keys": found,
            "limit": KEY_ROWS,
            "accounts": accounts,
            "filters": {"tenant": tenant, "account": account},
            "revoked": await _ended(deps.records, revoked),
        }
        return page(request, "keys.html", context, session=session)

    @router.post("/keys/revoke")
    async def revoke(request: Request) -> Response:
        form = await acting_form(auth, request, "revoke a key")
        if isinstance(form, Response):
            return form
        session, fields = form
        key_id = fields.get("key_id", "")
        if not RECORD_ID.fullmatch(key_id):
            return message(request, session, 400, "Not done", "No such key.")
        try:
            await keys.revoke(deps.revoker, key_id)
        except GatewayError as error:
            return message(request, session, error.status, "Not done", error.message)
        log.info("console key revoked", extra={"key_id": key_id, "actor": session.name})
        back = {"tenant": fields.get("tenant", ""), "account": fields.get("account", "")}
        query = urlencode({**{k: v for k, v in back.items() if v}, "revoked": key_id})
        return RedirectResponse(f"/console/keys?{query}", status_code=303)

    return router


async def _ended(records: KeyReader, key_id: str) -> KeyRecord | None:
    """The key the page says was revoked: only one that has indeed ended."""
    if not RECORD_ID.fullmatch(key_id):
        return None
    key = await records.get_key(key_id)
    return key if key is not None and key.revoked_at is not None else None
