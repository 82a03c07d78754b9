"""What every console page shares: templates, the signed-in session, forms, safe headers."""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from leasegate.control_plane.console.deps import SessionDeps
from leasegate.control_plane.console.session import (
    COOKIE_NAME,
    Session,
    csrf_matches,
    seal,
    unseal,
)
from leasegate.core.ports.errors import StoreError

log = logging.getLogger("leasegate.console")

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=HERE / "templates")
STATIC_DIR = HERE / "static"
SIGN_IN = "/console/sign-in"

# Scripts and styles only from our own origin, no frames, forms only back to us.
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_MAX_FORM_FIELD = 2000


class SignInRequired(Exception):
    """No valid session: the handler answers 303 to the sign-in page."""


class ConsoleUnavailable(Exception):
    """A store the page needs does not answer: the handler answers a 503 page saying which
    (`title`, `text`), with Retry-After."""

    title: ClassVar[str]
    text: ClassVar[str]


class SessionStoreDown(ConsoleUnavailable):
    """The store of open sessions cannot answer, and the request must not go on without it
    (signing in or out, a form that acts)."""

    title = "Sessions unavailable"
    text = (
        "The store that keeps console sessions does not answer, so signing in, signing "
        "out and acting are refused for now: nothing was changed. Try again shortly."
    )


class StoreDown(ConsoleUnavailable):
    """A read or a change of a console page failed in the database or Redis (a `StoreError`
    its route raised: `ConsoleRoute`)."""

    title = "Store unavailable"
    text = (
        "The database or Redis did not answer, so this page cannot be shown now. Try "
        "again shortly. If you sent a form, reload its page to see whether it took "
        "effect: sending it again is safe (a change already made is refused as stale, "
        "a key already revoked stays revoked)."
    )


class ConsoleRoute(APIRoute):
    """A console page's route: a `StoreError` out of it becomes `StoreDown`, so the page
    answers the console's 503 page while the API's routes keep the JSON envelope
    (`leasegate.web.errors`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except StoreError as exc:
                log.error(
                    "console store unavailable",
                    extra={"path": request.url.path, "error": exc.reason},
                )
                raise StoreDown from exc

        return console_handler


def console_router() -> APIRouter:
    """A router of console pages: under /console, out of the OpenAPI document."""
    return APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)


RETIRE_RETRY_S = 5.0
"""How often a replica that could not retire stale sessions at start-up tries again."""


class ConsoleAuth:
    """Signs and reads session cookies with the configured or a per-process secret, and keeps
    each session's life in the shared store of open sessions."""

    def __init__(self, deps: SessionDeps) -> None:
        configured = deps.secret
        self.secret = (
            configured.get_secret_value().encode()
            if configured is not None
            else secrets.token_bytes(32)
        )
        self.shared_secret = configured is not None
        """Only a configured secret can have signed sessions another process holds."""
        self.ttl_s = deps.ttl_s
        self.callers = deps.callers
        """The tokens a sign-in presents, their failed-authentication budget, the clock."""
        self._clock = deps.callers.clock
        self._open = deps.open_sessions
        self._credentials = deps.callers.auth.credentials(self.secret)

    def credential(self, kind: str, name: str) -> str:
        return self._credentials[(kind, name)]

    async def session(self, request: Request, *, acting: bool = False) -> Session:
        """The request's session, or SignInRequired. `acting`: the request changes something
        (a form), so a session store that cannot answer refuses it (SessionStoreDown); a page
        that only reads is then served on the cookie's signature alone."""
        now = self._clock.now().timestamp()
        session = unseal(request.cookies.get(COOKIE_NAME), self.secret, now)
        if session is None:
            raise SignInRequired
        # A token removed or changed, or another secret, ends its sessions here at once.
        expected = self._credentials.get((session.kind, session.name))
        if expected is None or not hmac.compare_digest(expected, session.credential):
            raise SignInRequired
        try:
            still_open = await self._open.is_open(session.credential, session.session_id, now)
        except StoreError as exc:
            if acting:
                raise SessionStoreDown from exc
            log.warning(
                "console session store unavailable: page served on the signature alone",
                extra={"path": request.url.path, "error": exc.reason},
            )
            return session
        if not still_open:
            raise SignInRequired
        return session

    async def open(self, session: Session) -> None:
        now = self._clock.now().timestamp()
        try:
            await self._open.open(session.credential, session.session_id, session.expires_at, now)
        except StoreError as exc:
            raise SessionStoreDown from exc

    async def close(self, session: Session) -> None:
        try:
            await self._open.close(session.credential, session.session_id)
        except StoreError as exc:
            raise SessionStoreDown from exc

    async def retire(self) -> None:
        """Close, for every replica, the open sessions of credentials this process does not
        hold: a token removed or changed, or the old secret's. Run at start-up, again every
        few seconds until the store answers. Skipped with a per-process secret: no other
        process can hold a session signed with it, and another replica's sessions (signed with
        its own secret) must not be closed by this one."""
        if not self.shared_secret:
            return
        keep = set(self._credentials.values())
        while True:
            try:
                retired = await self._open.retire(keep, self._clock.now().timestamp())
            except StoreError as exc:
                log.warning("console sessions not retired yet", extra={"error": exc.reason})
                await asyncio.sleep(RETIRE_RETRY_S)
                continue
            if retired:
                log.info("console sessions retired", extra={"sessions": retired})
            return

    def set_cookie(self, response: Response, session: Session, request: Request) -> None:
        response.set_cookie(
            COOKIE_NAME,
            seal(session, self.secret),
            max_age=int(self.ttl_s),
            path="/console",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )


def page(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    session: Session | None,
    status: int = 200,
) -> HTMLResponse:
    response = TEMPLATES.TemplateResponse(
        request, template, {"session": session, **context}, status_code=status
    )
    response.headers.update(_SECURITY_HEADERS)
    return response


def message(
    request: Request, session: Session | None, status: int, title: str, text: str
) -> HTMLResponse:
    return page(
        request, "message.html", {"title": title, "text": text}, session=session, status=status
    )


def csrf_refused(request: Request, session: Session) -> HTMLResponse:
    return message(
        request,
        session,
        403,
        "Form refused",
        "The form's anti-forgery token is missing or does not match this session. "
        "Reload the page and try again.",
    )


def read_only(request: Request, session: Session, what: str) -> HTMLResponse:
    return message(
        request,
        session,
        403,
        "Read-only session",
        "This session was opened with the control token: it can read, not act. "
        f"Sign in with an operator token to {what}.",
    )


def unknown_filter(request: Request, session: Session, hint: str) -> HTMLResponse:
    """A filter value the page does not offer: 400, never a query."""
    return message(
        request, session, 400, "Unknown filter", f"Pick the filters from the lists. {hint}"
    )


def to_sign_in() -> RedirectResponse:
    return RedirectResponse(SIGN_IN, status_code=303)


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form's first value per field, each cut to a sane length."""
    body = (await request.body()).decode("utf-8", errors="replace")
    try:
        parsed = parse_qs(body, keep_blank_values=True, max_num_fields=20)
    except ValueError:
        return {}  # too many fields: no CSRF token either, so the form is refused
    return {name: values[0][:_MAX_FORM_FIELD] for name, values in parsed.items()}


async def acting_form(
    auth: ConsoleAuth, request: Request, what: str
) -> tuple[Session, dict[str, str]] | HTMLResponse:
    """A form that changes something: the session and the form's fields, or the page that
    refuses it (a missing or wrong anti-forgery token: 403; a read-only session: 403, naming
    `what` it may not do)."""
    session = await auth.session(request, acting=True)
    fields = await form_fields(request)
    if not csrf_matches(session, fields.get("csrf")):
        return csrf_refused(request, session)
    if not session.can_act:
        return read_only(request, session, what)
    return session, fields
