"""What every console page shares: templates, the signed-in session, forms, safe headers."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from leasegate.control_plane.console.session import COOKIE_NAME, Session, seal, unseal
from leasegate.control_plane.runtime import ControlRuntime

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


class ConsoleAuth:
    """Signs and reads session cookies with the configured or a per-process secret."""

    def __init__(self, runtime: ControlRuntime) -> None:
        configured = runtime.settings.console_secret
        self.secret = (
            configured.get_secret_value().encode()
            if configured is not None
            else secrets.token_bytes(32)
        )
        self.ttl_s = float(runtime.settings.console_session_ttl_s)
        self._runtime = runtime

    def session(self, request: Request) -> Session:
        now = self._runtime.clock.now().timestamp()
        session = unseal(request.cookies.get(COOKIE_NAME), self.secret, now)
        # A token removed from the configuration ends its sessions too.
        if session is None or not self._runtime.auth.knows(session.kind, session.name):
            raise SignInRequired
        return session

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
