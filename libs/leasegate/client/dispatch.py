"""`Dispatch`: one logical call, driven to an answer through the hop protocol.

    async with AsyncControlClient(control_url, token) as control:
        dispatch = Dispatch(control, proxy_url, tenant="acme/web", dispatch_id="d-81",
                            model="gpt-4o", deadline_s=120)
        result = await dispatch.run(call)      # call(key, proxy_url) -> answer
        result.answer, result.chain

The run: mint (with an Idempotency-Key per attempt), renew the key if it nears expiry, call;
on a failure that qualifies for a hop (`failures.classify_failure`) revoke the key, then mint
citing its decision; on one that does not, stop at once. Held refusals are waited out within
the deadline, rejected ones end the run, a lost mint answer is recovered by replay and
supersede (`leases.Leases`). The run ends with `DispatchFailed` carrying the last refusal; the
dispatch's live lease is revoked whenever the run ends, answer or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Generic, TypeVar

import httpx

from leasegate.client.control import AsyncControlClient
from leasegate.client.errors import ProxyFailure
from leasegate.client.failures import Verdict, classify_failure
from leasegate.client.leases import Citation, Deadline, Identity, Leases
from leasegate.client.records import DispatchResult

T = TypeVar("T")

Call = Callable[[str, str], Awaitable[T]]
"""The transport: `call(key, proxy_url)` makes the provider call through the proxy and
returns the answer, or raises on failure (an SDK with `base_url` at the proxy and the key as
its API key, or the plain-httpx helpers of `leasegate.client.proxy`)."""

TRANSPORT_FAILURES: tuple[type[BaseException], ...] = (httpx.HTTPError, ProxyFailure, OSError)
"""Exceptions a call may end with that `classify_failure` reads (OSError covers timeouts and
broken connections). Anything else is a bug in the call and propagates unchanged."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Dispatch(Generic[T]):
    def __init__(
        self,
        control: AsyncControlClient,
        proxy_url: str,
        *,
        tenant: str,
        dispatch_id: str,
        model: str,
        role: str | None = None,
        ttl_s: int | None = None,
        deadline_s: float = 120.0,
        renew_within_s: float = 60.0,
        request_timeout_s: float = 10.0,
        failures: tuple[type[BaseException], ...] = (),
        classify: Callable[[BaseException], Verdict] = classify_failure,
        idempotency_prefix: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`deadline_s` bounds the whole run, every wait and request included.
        `renew_within_s`: renew the key before a call when it expires sooner than this.
        `failures`: more exception types a call may fail with, e.g. `(openai.APIError,)`.
        `idempotency_prefix`: names this run's mint attempts (`<prefix>/<n>`); random by
        default, set it to resume a run that crashed mid-mint."""
        self.control = control
        self.proxy_url = proxy_url.rstrip("/")
        self.identity = Identity(tenant, dispatch_id, model, role, ttl_s)
        self.deadline_s = deadline_s
        self.renew_within_s = renew_within_s
        self.request_timeout_s = request_timeout_s
        self.failures = TRANSPORT_FAILURES + failures
        self.classify = classify
        self.idempotency_prefix = idempotency_prefix
        self.clock = clock
        self.wall = wall
        self.sleep = sleep

    async def run(self, call: Call[T]) -> DispatchResult[T]:
        leases = Leases(
            self.control,
            self.identity,
            Deadline(self.deadline_s, self.clock),
            request_timeout_s=self.request_timeout_s,
            renew_within_s=self.renew_within_s,
            idempotency_prefix=self.idempotency_prefix,
            sleep=self.sleep,
            wall=self.wall,
        )
        try:
            return await self._drive(leases, call)
        finally:
            await leases.release()

    async def _drive(self, leases: Leases, call: Call[T]) -> DispatchResult[T]:
        lease = await leases.acquire(None)
        while True:
            lease = await leases.fresh(lease)
            remaining = leases.deadline.remaining()
            if remaining <= 0:
                raise leases.fail("deadline", "deadline reached before the call")
            scope = asyncio.timeout(remaining)
            try:
                async with scope:
                    answer = await call(lease.key, self.proxy_url)
            except self.failures as error:
                leases.last_failure = error
                if scope.expired():
                    leases.ended(lease, "deadline")
                    raise leases.fail("deadline", "deadline reached during the call") from error
                verdict = self.classify(error)
                leases.ended(lease, verdict.reason)
                if verdict.action == "stop":
                    raise leases.fail("call-failed", f"no hop for {verdict.reason}") from error
                if verdict.action == "again":
                    await leases.wait(verdict.retry_after_s or 1.0, verdict.reason)
                    continue
                cited = Citation("retry", lease.link.mint_decision_id, lease.link.key_id)
                await leases.revoke(lease.link.key_id)  # before the hop: one live lease
                lease = await leases.acquire(cited)
                continue
            leases.ended(lease, None)
            return DispatchResult(answer, tuple(leases.chain))
