"""Who is calling: the FastAPI dependencies that authenticate a request's bearer token.

Every router of the control plane names its caller through these two, so "an admin call" means
one thing everywhere: a known token, and an admin one (a control token gets 403). Wrong tokens
count against the client address (`leasegate.control_plane.throttle`, the budget the console's
sign-in shares): past it, the address is answered 429 `too-many-failed-authentications` with
Retry-After, before its token is even compared."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Header, Request

from leasegate.control_plane.runtime import ControlRuntime
from leasegate.core.errors import GatewayError
from leasegate.web.auth import Caller, require_admin

CallerDependency = Callable[..., Awaitable[Caller]]


def client_address(request: Request) -> str:
    """The address uvicorn reports: the peer's, or a trusted proxy's `X-Forwarded-For`."""
    return request.client.host if request.client is not None else "unknown"


def authenticate(runtime: ControlRuntime, address: str, authorization: str | None) -> Caller:
    """The caller a bearer token names, unless `address` has failed too often lately."""
    throttle = runtime.failed_auth
    now = runtime.clock.monotonic()
    if (wait_s := throttle.wait_s(address, now)) is not None:
        raise GatewayError(
            "too-many-failed-authentications",
            "too many failed authentications from this address",
            retry_after_s=wait_s,
        )
    try:
        return runtime.auth.authenticate(authorization)
    except GatewayError:
        if authorization:  # a credential was presented: a guess (no header is no guess)
            throttle.failed(address, now)
        raise


def any_caller(runtime: ControlRuntime) -> CallerDependency:
    """A control or an admin token; 401 for anything else."""

    async def caller(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Caller:
        return authenticate(runtime, client_address(request), authorization)

    return caller


def admin_caller(runtime: ControlRuntime) -> CallerDependency:
    """An admin token; 401 for an unknown one, 403 for a control token."""

    async def admin(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Caller:
        return require_admin(authenticate(runtime, client_address(request), authorization))

    return admin
