"""The console's sign-in, Pool and Actions pages (reads live in `reads.py`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from leasegate.control_plane.admin import change_state
from leasegate.control_plane.callers import client_address
from leasegate.control_plane.console.deps import ConsoleDeps
from leasegate.control_plane.console.keys import key_pages
from leasegate.control_plane.console.pool import pool_view
from leasegate.control_plane.console.reads import read_pages
from leasegate.control_plane.console.session import (
    COOKIE_NAME,
    Session,
    csrf_matches,
    new_session,
)
from leasegate.control_plane.console.spend import spend_pages
from leasegate.control_plane.console.traffic import traffic_pages
from leasegate.control_plane.console.web import (
    STATIC_DIR,
    ConsoleAuth,
    ConsoleUnavailable,
    SignInRequired,
    acting_form,
    console_router,
    csrf_refused,
    form_fields,
    message,
    page,
    to_sign_in,
)
from leasegate.control_plane.deps import OverlayRecords
from leasegate.control_plane.overlay import StateChange
from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.core.tasks import stop_task

log = logging.getLogger("leasegate.console")

_STATES = {"disable": "disabled", "drain": "draining", "enable": "enabled"}
STORE_DOWN_RETRY_S = 2.0
RETIRE_WAIT_S = 3.0


def install_console(app: FastAPI, deps: ConsoleDeps) -> None:
    """Serve the console at /console on this app (the control plane, or `leasegate dev`)."""
    auth = ConsoleAuth(deps.sessions)

    async def on_sign_in_required(_: Request, __: Exception) -> Response:
        return to_sign_in()

    async def on_unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ConsoleUnavailable)  # noqa: S101 - registered for this type
        response = message(request, None, 503, exc.title, exc.text)
        response.headers["Retry-After"] = retry_after_header(STORE_DOWN_RETRY_S)
        return response

    app.add_exception_handler(SignInRequired, on_sign_in_required)
    app.add_exception_handler(ConsoleUnavailable, on_unavailable)
    _retire_at_start_up(app, auth)
    app.mount("/console/static", StaticFiles(directory=STATIC_DIR), name="console-static")
    app.include_router(_session_pages(auth))
    app.include_router(_pool_pages(deps, auth))
    app.include_router(read_pages(deps, auth))
    app.include_router(spend_pages(deps, auth))
    app.include_router(key_pages(deps, auth))
    app.include_router(traffic_pages(deps, auth))


def _retire_at_start_up(app: FastAPI, auth: ConsoleAuth) -> None:
    """Around the app's own lifespan: retire the sessions of credentials this replica no
    longer holds before serving (waiting at most `RETIRE_WAIT_S`; if the store does not
    answer by then, it keeps trying in the background)."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[Any]:
        async with inner(served) as state:
            retiring = asyncio.create_task(auth.retire())
            await asyncio.wait({retiring}, timeout=RETIRE_WAIT_S)
            try:
                yield state
            finally:
                await stop_task(retiring)  # its Redis calls can swallow a single cancel

    app.router.lifespan_context = lifespan


def _session_pages(auth: ConsoleAuth) -> APIRouter:
    router = console_router()
    callers = auth.callers
    throttle = callers.throttle  # one budget with the API's bearer tokens

    @router.get("")
    async def home() -> RedirectResponse:
        return RedirectResponse("/console/pool", status_code=303)

    @router.get("/sign-in")
    async def sign_in_form(request: Request) -> Response:
        return page(request, "sign_in.html", {"error": None}, session=None)

    @router.post("/sign-in")
    async def sign_in(request: Request) -> Response:
        address = client_address(request)
        when = callers.clock.monotonic()
        if (wait_s := throttle.wait_s(address, when)) is not None:
            return _throttled(request, wait_s)
        token = (await form_fields(request)).get("token", "").strip()
        try:
            caller = callers.auth.authenticate(f"Bearer {token}")
        except GatewayError:
            throttle.failed(address, when)
            error = "That token is not an operator or control token of this gateway."
            return page(request, "sign_in.html", {"error": error}, session=None, status=401)
        throttle.succeeded(address)
        now = callers.clock.now().timestamp()
        credential = auth.credential(caller.kind, caller.name)
        session = new_session(caller.kind, caller.name, credential, now, auth.ttl_s)
        await auth.open(session)
        response = RedirectResponse("/console/pool", status_code=303)
        auth.set_cookie(response, session, request)
        return response

    @router.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        session = await auth.session(request, acting=True)
        if not csrf_matches(session, (await form_fields(request)).get("csrf")):
            return csrf_refused(request, session)
        await auth.close(session)  # for every replica, before the cookie goes
        response = to_sign_in()
        response.delete_cookie(COOKIE_NAME, path="/console")
        return response

    return router


def _pool_pages(deps: ConsoleDeps, auth: ConsoleAuth) -> APIRouter:
    router = console_router()

    @router.get("/pool")
    async def pool(request: Request) -> Response:
        session = await auth.session(request)
        view = await pool_view(deps.accounts, deps.overlay)
        return page(request, "pool.html", {"pool": view, "nav": "pool"}, session=session)

    @router.get("/pool/grid")
    async def pool_grid(request: Request) -> Response:
        """The grid alone, polled by console.js every 2 s."""
        session = await auth.session(request)
        view = await pool_view(deps.accounts, deps.overlay)
        return page(request, "_grid.html", {"pool": view}, session=session)

    @router.get("/actions")
    async def actions(request: Request, done: int | None = None) -> Response:
        session = await auth.session(request)
        view = await pool_view(deps.accounts, deps.overlay)
        record = next((r for r in view.records if r.seq == done), None)
        context = {"pool": view, "nav": "actions", "done": record}
        return page(request, "actions.html", context, session=session)

    @router.post("/actions")
    async def act(request: Request) -> Response:
        form = await acting_form(auth, request, "change an account")
        if isinstance(form, Response):
            return form
        session, fields = form
        return await _apply(request, deps, session, fields)

    return router


async def _apply(
    request: Request, deps: ConsoleDeps, session: Session, fields: dict[str, str]
) -> Response:
    """Validate the form, then apply it as the session's operator (the token's name)."""
    account_id = fields.get("account", "")
    state = _STATES.get(fields.get("action", ""))
    reason = fields.get("reason", "").strip()
    revision = fields.get("revision", "")
    problem = None
    if deps.registry.account(account_id) is None:
        problem = "No such account."
    elif state is None:
        problem = "Choose disable, drain or enable."
    elif not reason or len(reason) > 500:
        problem = "A reason is required (at most 500 characters)."
    elif not revision.isdigit():
        problem = "The form lost its revision: reload the page."
    if problem is not None or state is None:
        return message(request, session, 400, "Not done", problem or "")
    change = StateChange(
        account_id=account_id,
        state=state,
        expected_revision=int(revision),
        reason=reason,
        actor=session.name,
        on_behalf_of=None,
    )
    try:
        record, _ = await change_state(deps.admin, change)
    except GatewayError as error:
        if error.code != "revision-conflict":
            return message(request, session, error.status, "Not done", error.message)
        return await _conflict(request, deps.overlay, session, int(revision))
    return RedirectResponse(f"/console/actions?done={record.seq}", status_code=303)


async def _conflict(
    request: Request, overlay: OverlayRecords, session: Session, seen: int
) -> Response:
    verdict, snapshot = await overlay.read_full()
    since = [r for r in snapshot.records if r.seq > seen]
    context = {"seen": seen, "current": verdict.revision, "changes": since, "nav": "actions"}
    return page(request, "conflict.html", context, session=session, status=409)


def _throttled(request: Request, wait_s: float) -> Response:
    retry_after = retry_after_header(wait_s)
    error = f"Too many failed sign-ins from this address: try again in {retry_after} s."
    response = page(request, "sign_in.html", {"error": error}, session=None, status=429)
    response.headers["Retry-After"] = retry_after
    return response
