"""The control plane over httpx: `ControlClient` (sync) and `AsyncControlClient` (async).

Both are thin: every method builds a `wire.Operation` and hands it to `send`, which moves the
bytes and lets `wire.outcome` read the answer or raise the gateway's refusal. A transport
failure is `ControlUnreachable`: for a mint it means "maybe minted" (see `Dispatch`).

    with ControlClient("http://127.0.0.1:8080", token) as control:
        minted = control.mint("acme/web", "d-81", "gpt-4o", idempotency_key="d-81/1")
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Self, TypeVar

import httpx

from leasegate.client import wire
from leasegate.client.errors import ControlUnreachable
from leasegate.client.records import Accounts, Decision, Evidence, KeyInfo, Minted
from leasegate.client.wire import Operation
from leasegate.core.records import AdminState

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 10.0


def _headers(op: Operation[T], token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **op.headers}


class ControlClient:
    """Blocking client. `token` is the control token (an admin token for `set_account_state`)."""

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
            response = self._http.request(
                op.method,
                op.path,
                json=op.body,
                params=dict(op.params) or None,
                headers=_headers(op, self._token),
                timeout=timeout_s or self._timeout_s,
            )
        except httpx.TransportError as exc:
            raise ControlUnreachable(f"{op.method} {op.path}: {type(exc).__name__}") from exc
        return wire.outcome(op, response.status_code, response.headers, response.content)

    def mint(
        self,
        tenant: str,
        dispatch_id: str,
        model: str,
        *,
        role: str | None = None,
        ttl_s: int | None = None,
        retry_of_mint_decision_id: str | None = None,
        supersedes_mint_decision_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Minted:
        return self.send(
            wire.mint(
                tenant,
                dispatch_id,
                model,
                role=role,
                ttl_s=ttl_s,
                retry_of_mint_decision_id=retry_of_mint_decision_id,
                supersedes_mint_decision_id=supersedes_mint_decision_id,
                idempotency_key=idempotency_key,
            )
        )

    def revoke(self, key_id: str) -> None:
        self.send(wire.revoke(key_id))

    def renew(self, key_id: str, ttl_s: int | None = None) -> Minted:
        return self.send(wire.renew(key_id, ttl_s))

    def get_key(self, key_id: str) -> KeyInfo:
        return self.send(wire.get_key(key_id))

    def decision(self, decision_id: str) -> Decision:
        return self.send(wire.decision(decision_id))

    def decisions(self, tenant: str, dispatch_id: str) -> tuple[Decision, ...]:
        return self.send(wire.decisions(tenant, dispatch_id))

    def evidence(
        self,
        *,
        decision_id: str | None = None,
        account_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> tuple[Evidence, ...]:
        return self.send(
            wire.evidence(decision_id=decision_id, account_id=account_id, since=since, limit=limit)
        )

    def accounts(self) -> Accounts:
        return self.send(wire.accounts())

    def account(self, account_id: str) -> Accounts:
        return self.send(wire.account(account_id))

    def set_account_state(
        self,
        account_id: str,
        state: AdminState,
        *,
        expected_revision: int,
        reason: str,
        on_behalf_of: str | None = None,
    ) -> Accounts:
        return self.send(
            wire.set_account_state(
                account_id,
                state,
                expected_revision=expected_revision,
                reason=reason,
                on_behalf_of=on_behalf_of,
            )
        )

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
                op.method,
                op.path,
                json=op.body,
                params=dict(op.params) or None,
                headers=_headers(op, self._token),
                timeout=timeout_s or self._timeout_s,
            )
        except httpx.TransportError as exc:
            raise ControlUnreachable(f"{op.method} {op.path}: {type(exc).__name__}") from exc
        return wire.outcome(op, response.status_code, response.headers, response.content)

    async def mint(
        self,
        tenant: str,
        dispatch_id: str,
        model: str,
        *,
        role: str | None = None,
        ttl_s: int | None = None,
        retry_of_mint_decision_id: str | None = None,
        supersedes_mint_decision_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Minted:
        return await self.send(
            wire.mint(
                tenant,
                dispatch_id,
                model,
                role=role,
                ttl_s=ttl_s,
                retry_of_mint_decision_id=retry_of_mint_decision_id,
                supersedes_mint_decision_id=supersedes_mint_decision_id,
                idempotency_key=idempotency_key,
            )
        )

    async def revoke(self, key_id: str) -> None:
        await self.send(wire.revoke(key_id))

    async def renew(self, key_id: str, ttl_s: int | None = None) -> Minted:
        return await self.send(wire.renew(key_id, ttl_s))

    async def get_key(self, key_id: str) -> KeyInfo:
        return await self.send(wire.get_key(key_id))

    async def decision(self, decision_id: str) -> Decision:
        return await self.send(wire.decision(decision_id))

    async def decisions(self, tenant: str, dispatch_id: str) -> tuple[Decision, ...]:
        return await self.send(wire.decisions(tenant, dispatch_id))

    async def evidence(
        self,
        *,
        decision_id: str | None = None,
        account_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> tuple[Evidence, ...]:
        return await self.send(
            wire.evidence(decision_id=decision_id, account_id=account_id, since=since, limit=limit)
        )

    async def accounts(self) -> Accounts:
        return await self.send(wire.accounts())

    async def account(self, account_id: str) -> Accounts:
        return await self.send(wire.account(account_id))

    async def set_account_state(
        self,
        account_id: str,
        state: AdminState,
        *,
        expected_revision: int,
        reason: str,
        on_behalf_of: str | None = None,
    ) -> Accounts:
        return await self.send(
            wire.set_account_state(
                account_id,
                state,
                expected_revision=expected_revision,
                reason=reason,
                on_behalf_of=on_behalf_of,
            )
        )

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
