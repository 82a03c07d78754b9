"""Who is calling: the FastAPI dependencies that authenticate a request's bearer token.

Every router of the control plane names its caller through these two, so "an admin call" means
one thing everywhere: a known token, and an admin one (a control token gets 403)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Header

from leasegate.control_plane.runtime import ControlRuntime
from leasegate.web.auth import Caller, require_admin

CallerDependency = Callable[..., Awaitable[Caller]]


def any_caller(runtime: ControlRuntime) -> CallerDependency:
    """A control or an admin token; 401 for anything else."""

    async def caller(authorization: Annotated[str | None, Header()] = None) -> Caller:
        return runtime.auth.authenticate(authorization)

    return caller


def admin_caller(runtime: ControlRuntime) -> CallerDependency:
    """An admin token; 401 for an unknown one, 403 for a control token."""

    async def admin(authorization: Annotated[str | None, Header()] = None) -> Caller:
        return require_admin(runtime.auth.authenticate(authorization))

    return admin
