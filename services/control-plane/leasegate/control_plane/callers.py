"""Who is calling: the FastAPI dependencies that authenticate a request's bearer token.

Every router of the control plane names its caller through these two, so "an admin call" means
one thing everywhere: a known token, and an admin one (a control token gets 403). Wrong tokens
count against the client address (`leasegate.control_plane.throttle`, the budget the console's
sign-in shares): past it, the address is answered 429 `too-many-failed-authentications` with
Retry-After, before its token is even compared."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Header, Request

from leasegate.control_plane.throttle import FailedAuthThrottle
from leasegate.core.clock import Clock
from leasegate.core.errors import GatewayError
from leasegate.web.auth import Caller, TokenAuthority, require_admin

CallerDependency = Callable[..., Awaitable[Caller]]


@dataclass(frozen=True, slots=True)
class Callers:
    """What authenticating a caller uses: the configured tokens, the failed-authentication
    budget per address (shared with the console's sign-in) and the clock it counts by."""

    auth: TokenAuthority
    throttle: FailedAuthThrottle
    clock: Clock


def client_address(request: Request) -> str:
    """The address uvicorn reports: the peer's, or a trusted proxy's `X-Forwarded-For`."""
    return request.client.host if request.client is not None else "unknown"


def authenticate(callers: Callers, address: str, authorization: str | None) -> Caller:
    """The caller a bearer token names, unless `address` has failed too often lately."""
    throttle = callers.throttle
    now = callers.clock.monotonic()
    if (wait_s := throttle.wait_s(address, now)) is not None:
        raise GatewayError(
            "too-many-failed-authentications",
            "too many failed authentications from this address",
            retry_after_s=wait_s,
        )
    try:
        return callers.auth.authenticate(authorization)
    except GatewayError:
        if authorization:  # a credential was presented: a guess (no header is no guess)
            throttle.failed(address, now)
        raise


def any_caller(callers: Callers) -> CallerDependency:
    """A control or an admin token; 401 for anything else."""

    async def caller(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Caller:
        return authenticate(callers, client_address(request), authorization)

    return caller


def admin_caller(callers: Callers) -> CallerDependency:
    """An admin token; 401 for an unknown one, 403 for a control token."""

    async def admin(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Caller:
        return require_admin(authenticate(callers, client_address(request), authorization))

    return admin
