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
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Generic, TypeVar

import httpx

from leasegate.client.control import AsyncControlClient
from leasegate.client.errors import ProxyFailure
from leasegate.client.failures import Verdict, classify_failure
from leasegate.client.leases import Citation, Deadline, Identity, Leases, mint_operation
from leasegate.client.records import DispatchResult
from leasegate.wire import Budget

T = TypeVar("T")

Call = Callable[[str, str], Awaitable[T]]
"""The transport: `call(key, proxy_url)` makes the provider call through the proxy and
returns the answer, or raises on failure (an SDK with `base_url` at the proxy and the key as
its API key, or the plain-httpx helpers of `leasegate.client.proxy`)."""

TRANSPORT_FAILURES: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    ProxyFailure,
    OSError,
    json.JSONDecodeError,
)
"""Exceptions a call may end with that `classify_failure` reads (OSError covers timeouts and
broken connections; JSONDecodeError is an SDK choking on a garbled stream event). Anything
else is a bug in the call and propagates unchanged."""


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
        budget: Budget | None = None,
        affinity: str | None = None,
        allowed_providers: Sequence[str] | None = None,
        allowed_regions: Sequence[str] | None = None,
        deadline_s: float = 120.0,
        renew_within_s: float = 60.0,
        request_timeout_s: float = 10.0,
        same_account_retries: int = 1,
        retry_after_bound_s: float = 5.0,
        failures: tuple[type[BaseException], ...] = (),
        classify: Callable[[BaseException], Verdict] = classify_failure,
        idempotency_prefix: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`budget`: the dispatch's spend ceiling, sent with every mint of its chain.
        `deadline_s` bounds the whole run, every wait and request included.
        `renew_within_s`: renew the key before a call when it expires sooner than this.
        `same_account_retries`: how many times a transient failure (`Verdict.transient`: a
        5xx, a 429 with a `Retry-After`, a reset before any response byte) is retried on the
        same lease before hopping; 0 hops at once. A wait the upstream asks for longer than
        `retry_after_bound_s` hops instead. Each retry is noted in `Link.retried`.
        `failures`: more exception types a call may fail with, e.g. `(openai.APIError,)`.
        `idempotency_prefix`: names this run's mint attempts (`<prefix>/<n>`); random by
        default, set it to resume a run that crashed mid-mint. `affinity`: a session or task
        id; the gateway keeps dispatches naming it on the account that last served it while
        that account has room (its prompt cache is there). `allowed_providers` /
        `allowed_regions`: data residency, within the tenant's configured restriction; every
        mint of the chain is served only by those provider kinds and in those regions.
        Arguments the mint body would refuse (an empty `Budget()`, a tenant with a space)
        raise pydantic's `ValidationError` here, before any request."""
        self.control = control
        self.proxy_url = proxy_url.rstrip("/")
        self.identity = Identity(
            tenant,
            dispatch_id,
            model,
            role,
            ttl_s,
            budget=budget,
            affinity=affinity,
            allowed_providers=tuple(allowed_providers) if allowed_providers is not None else None,
            allowed_regions=tuple(allowed_regions) if allowed_regions is not None else None,
        )
        mint_operation(self.identity)  # a body the control plane would refuse raises here, unsent
        self.deadline_s = deadline_s
        self.renew_within_s = renew_within_s
        self.request_timeout_s = request_timeout_s
        if same_account_retries < 0 or retry_after_bound_s < 0:
            raise ValueError("same_account_retries and retry_after_bound_s must be >= 0")
        self.same_account_retries = same_account_retries
        self.retry_after_bound_s = retry_after_bound_s
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
        retried = 0  # same-lease retries of `lease`
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
                if retried < self.same_account_retries and self._retry_here(verdict):
                    retried += 1
                    leases.retried(lease, verdict.reason)
                    await leases.wait(verdict.retry_after_s or 0.0, verdict.reason)
                    continue
                leases.ended(lease, verdict.reason)
                if verdict.action == "stop":
                    raise leases.fail("call-failed", f"no hop for {verdict.reason}") from error
                if verdict.action == "again":
                    wait = 1.0 if verdict.retry_after_s is None else verdict.retry_after_s
                    await leases.wait(wait, verdict.reason)
                    continue
                cited = Citation("retry", lease.link.mint_decision_id, lease.link.key_id)
                await leases.revoke(lease.link.key_id)  # before the hop: one live lease
                if verdict.action == "fallback" and verdict.model:
                    leases.identity = replace(leases.identity, model=verdict.model)
                lease, retried = await leases.acquire(cited), 0
                continue
            leases.ended(lease, None)
            return DispatchResult(answer, tuple(leases.chain))

    def _retry_here(self, verdict: Verdict) -> bool:
        """A transient failure, and any wait it asks for within the bound."""
        if verdict.action != "hop" or not verdict.transient:
            return False
        return verdict.retry_after_s is None or verdict.retry_after_s <= self.retry_after_bound_s
