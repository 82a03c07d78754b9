"""The control plane over httpx: `ControlClient` (sync) and `AsyncControlClient` (async).

Both are thin: every method is a builder of `wire` (its signature and documentation are the
builder's) whose `Operation` it hands to `send`, which moves the bytes and lets
`wire.outcome` read the answer or raise the gateway's refusal; only the moving differs
between the two. A transport
failure is `ControlUnreachable`: for a mint it means "maybe minted" (see `Dispatch`).

    with ControlClient("http://127.0.0.1:8080", token) as control:
        minted = control.mint("acme/web", "d-81", "gpt-4o", idempotency_key="d-81/1")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import httpx

from leasegate.client import wire
from leasegate.client.errors import ControlUnreachable
from leasegate.client.wire import Operation

T = TypeVar("T")
P = ParamSpec("P")
DEFAULT_TIMEOUT_S = 10.0


def _request(op: Operation[T], token: str, timeout_s: float) -> dict[str, Any]:
    """httpx's arguments for `op`: the one request both clients send."""
    return {
        "method": op.method,
        "url": op.path,
        "json": op.json(),
        "params": dict(op.params) or None,
        "headers": {"Authorization": f"Bearer {token}", **op.headers},
        "timeout": timeout_s,
    }


def _unreachable(op: Operation[T], exc: httpx.TransportError) -> ControlUnreachable:
    return ControlUnreachable(f"{op.method} {op.path}: {type(exc).__name__}")


def _as_builder(method: Callable[..., Any], build: Callable[..., Operation[Any]]) -> None:
    """`help()` and `inspect.signature` show the builder's parameters and documentation, and
    the answer the method returns (the builder's `Operation[T]` read as `T`)."""
    signature = inspect.signature(build)
    answer = signature.return_annotation
    if isinstance(answer, str) and answer.startswith("Operation[") and answer.endswith("]"):
        answer = answer.removeprefix("Operation[")[:-1]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    signature = signature.replace(
        parameters=[this, *signature.parameters.values()], return_annotation=answer
    )
    method.__doc__ = build.__doc__
    method.__signature__ = signature  # type: ignore[attr-defined]


def _blocking(build: Callable[P, Operation[T]]) -> Callable[Concatenate[ControlClient, P], T]:
    """A `ControlClient` method: build the operation (its signature is `build`'s), send it."""

    def call(self: ControlClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    _as_builder(call, build)
    return call


def _awaited(
    build: Callable[P, Operation[T]],
) -> Callable[Concatenate[AsyncControlClient, P], Coroutine[Any, Any, T]]:
    """An `AsyncControlClient` method: the same operation, awaited."""

    async def call(self: AsyncControlClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    _as_builder(call, build)
    return call


class ControlClient:
    """Blocking client. `token` is the control token (an admin token for `set_account_state`,
    `audit`, `tenants` and `set_tenant_budget`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._token = token
        self._timeout_s = timeout_s
        self._http = httpx.Client(base_url=base_url, transport=transport)

    def send(self, op: Operation[T], *, timeout_s: float | None = None) -> T:
        try:
            response = self._http.request(**_request(op, self._token, timeout_s or self._timeout_s))
        except httpx.TransportError as exc:
            raise _unreachable(op, exc) from exc
        return wire.outcome(op, response.status_code, response.headers, response.content)

    mint = _blocking(wire.mint)
    revoke = _blocking(wire.revoke)
    renew = _blocking(wire.renew)
    get_key = _blocking(wire.get_key)
    decision = _blocking(wire.decision)
    decisions = _blocking(wire.decisions)
    evidence = _blocking(wire.evidence)
    accounts = _blocking(wire.accounts)
    account = _blocking(wire.account)
    set_account_state = _blocking(wire.set_account_state)
    audit = _blocking(wire.audit)
    tenants = _blocking(wire.tenants)
    set_tenant_budget = _blocking(wire.set_tenant_budget)
    usage = _blocking(wire.usage)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncControlClient:
    """The same calls as `ControlClient`, awaited."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._token = token
        self._timeout_s = timeout_s
        self._http = httpx.AsyncClient(base_url=base_url, transport=transport)

    async def send(self, op: Operation[T], *, timeout_s: float | None = None) -> T:
        try:
            response = await self._http.request(
                **_request(op, self._token, timeout_s or self._timeout_s)
            )
        except httpx.TransportError as exc:
            raise _unreachable(op, exc) from exc
        return wire.outcome(op, response.status_code, response.headers, response.content)

    mint = _awaited(wire.mint)
    revoke = _awaited(wire.revoke)
    renew = _awaited(wire.renew)
    get_key = _awaited(wire.get_key)
    decision = _awaited(wire.decision)
    decisions = _awaited(wire.decisions)
    evidence = _awaited(wire.evidence)
    accounts = _awaited(wire.accounts)
    account = _awaited(wire.account)
    set_account_state = _awaited(wire.set_account_state)
    audit = _awaited(wire.audit)
    tenants = _awaited(wire.tenants)
    set_tenant_budget = _awaited(wire.set_tenant_budget)
    usage = _awaited(wire.usage)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
