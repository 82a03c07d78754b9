"""The fleet: agent-like workers, each running tasks one after another; a task is one
`Dispatch` of 4-8 turns whose prompt grows every turn, with think times between turns while
the lease is held. A refused or failed turn is left to `Dispatch` (Retry-After waits,
same-account retry, hops through the control plane); the task's next invocation of `call`
resumes at the turn that failed. A task the dispatch gives up on gives up its remaining turns.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from bench.fleet.workload import (
    ACCOUNTS,
    CHARS_PER_TOKEN,
    MODEL,
    AccountSpec,
    TenantSpec,
    Turn,
    latency_s,
    task,
)
from leasegate.client import (
    AsyncControlClient,
    Dispatch,
    DispatchFailed,
    GatewayRefusal,
    Minted,
    ProxyFailure,
    post_json,
)
from leasegate.client.wire import Operation

T = TypeVar("T")
DEADLINE_S = 60.0
"""Each task's `Dispatch(deadline_s=...)`: every turn, wait and hop of the task within it."""
_FILL = "lore" * 20_000


@dataclass(frozen=True, slots=True)
class TurnDone:
    tenant: str
    done_at: float
    """Seconds after the fleet started."""
    seconds: float
    """From wanting the turn (the task's start, or the end of the think before it) to its
    answer: mints, waits, hops and retries included."""
    upstream_s: float
    """The mock's own time for it."""
    tokens: int
    account: str
    index: int = 0
    """The turn's place in its task (0: the first, whose time includes the task's mint)."""


@dataclass
class Records:
    turns: list[TurnDone] = field(default_factory=list)
    given_up: Counter[str] = field(default_factory=Counter)
    """Tenant -> turns of tasks their dispatch gave up on (before the end of the run)."""
    ended: Counter[str] = field(default_factory=Counter)
    """Why dispatches gave up: `reason/code`."""
    tasks: Counter[str] = field(default_factory=Counter)
    hops: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Failed proxied calls: `gateway <code> <status>` or `upstream <status>`."""
    retry_after: dict[str, list[float]] = field(default_factory=dict)
    """The same key -> every `Retry-After` (or envelope `retry_after_s`) they carried."""
    mint_refusals: Counter[str] = field(default_factory=Counter)
    failures_by_account: Counter[str] = field(default_factory=Counter)
    """`<account> <label>` -> failed proxied calls on keys of that account."""


class RecordingControl(AsyncControlClient):
    """The control client, noting which account each minted key is on (the worker picks the
    provider's wire format by it, as a real worker reads the lease) and every mint refusal."""

    def __init__(self, base_url: str, token: str, records: Records) -> None:
        super().__init__(base_url, token)
        self.records = records
        self.key_accounts: dict[str, str] = {}

    async def send(self, op: Operation[T], *, timeout_s: float | None = None) -> T:
        try:
            result = await super().send(op, timeout_s=timeout_s)
        except GatewayRefusal as refusal:
            if op.method == "POST":
                self.records.mint_refusals[refusal.code] += 1
            raise
        if isinstance(result, Minted) and result.key is not None:
            self.key_accounts[result.key] = result.account_id
        return result


@dataclass
class _Progress:
    """A task's place: the next turn to answer, when it was wanted, whether the think before
    it is over (a hop re-enters `call` at the same turn, without thinking again)."""

    wanted: float
    next: int = 0
    thought: bool = True


class Stopped(Exception):
    """The run is over: the task stops at a turn boundary (not a failure `Dispatch` reads)."""


def _text(tokens: int, prefix: str = "") -> str:
    return prefix + _FILL[: tokens * CHARS_PER_TOKEN - len(prefix)]


def request(
    kind: str, session: str, turns: tuple[Turn, ...], index: int
) -> tuple[str, dict[str, Any]]:
    """The path and body of turn `index`: the whole conversation so far."""
    messages: list[dict[str, str]] = []
    for j in range(index + 1):
        prefix = f"session {session}\n" if j == 0 else ""
        messages.append({"role": "user", "content": _text(turns[j].added_tokens, prefix)})
        if j < index:
            messages.append({"role": "assistant", "content": _text(turns[j].max_tokens)})
    body = {"model": MODEL, "max_tokens": turns[index].max_tokens, "messages": messages}
    return ("/v1/messages" if kind == "anthropic" else "/v1/chat/completions"), body


@dataclass
class Fleet:
    control: RecordingControl
    http: httpx.AsyncClient
    proxy_url: str
    records: Records
    started: float
    stop_at: float
    clock: Callable[[], float] = time.monotonic
    specs: Mapping[str, AccountSpec] = field(
        default_factory=lambda: {spec.id: spec for spec in ACCOUNTS}
    )

    def now(self) -> float:
        return self.clock() - self.started

    async def worker(self, tenant: TenantSpec, index: int, seed: int) -> None:
        rng = random.Random(seed)
        count = 0
        await asyncio.sleep(rng.uniform(*tenant.idle_s))  # workers do not start in step
        while self.clock() < self.stop_at:
            count += 1
            await self.run_task(tenant, f"{tenant.name.split('/')[1]}-{index}-{count}", rng)
            await asyncio.sleep(rng.uniform(*tenant.idle_s))

    async def run_task(self, tenant: TenantSpec, task_id: str, rng: random.Random) -> None:
        turns = task(tenant, rng)
        state = _Progress(wanted=self.clock())
        records = self.records

        async def call(key: str, proxy_url: str) -> int:
            spec = self.specs[self.control.key_accounts[key]]
            while state.next < len(turns):
                if not state.thought:
                    await asyncio.sleep(turns[state.next - 1].think_s)
                    state.thought, state.wanted = True, self.clock()
                if self.clock() >= self.stop_at:
                    raise Stopped
                turn = turns[state.next]
                path, body = request(spec.kind, task_id, turns, state.next)
                try:
                    await post_json(self.http, proxy_url, key, path, body)
                except ProxyFailure as failure:
                    origin = f"gateway {failure.code}" if failure.gateway else "upstream"
                    label = f"{origin} {failure.status}"
                    records.failures[label] += 1
                    records.failures_by_account[f"{spec.id} {label}"] += 1
                    if failure.retry_after_s is not None:
                        records.retry_after.setdefault(label, []).append(failure.retry_after_s)
                    raise
                records.turns.append(
                    TurnDone(
                        tenant.name,
                        self.now(),
                        self.clock() - state.wanted,
                        latency_s(turn.max_tokens),
                        turn.tokens,
                        spec.id,
                        state.next,
                    )
                )
                state.next += 1
                state.thought = False
            return len(turns)

        dispatch: Dispatch[int] = Dispatch(
            self.control,
            self.proxy_url,
            tenant=tenant.name,
            dispatch_id=task_id,
            model=MODEL,
            deadline_s=DEADLINE_S,
        )
        records.tasks["started"] += 1
        try:
            result = await dispatch.run(call)
        except Stopped:
            records.tasks["stopped at the end"] += 1
        except DispatchFailed as failed:
            records.hops += sum(1 for link in failed.chain if link.hop)
            if self.clock() < self.stop_at:
                records.tasks["given up"] += 1
                records.given_up[tenant.name] += len(turns) - state.next
                records.ended[f"{failed.reason}/{failed.code}"] += 1
        else:
            records.tasks["done"] += 1
            records.hops += sum(1 for link in result.chain if link.hop)


async def drive(
    control_url: str,
    proxy_url: str,
    control_token: str,
    workers: Mapping[TenantSpec, int],
    seconds: float,
    on_start: Callable[[], Any],
    on_stop: Callable[[], Any],
    grace_s: float = 5.0,
) -> Records:
    """Run the fleet for `seconds`; `on_start`/`on_stop` are awaited at the run's start and
    end (the mock's reset and its counters); tasks still running `grace_s` later are
    cancelled."""
    records = Records()
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
    async with (
        RecordingControl(control_url, control_token, records) as control,
        httpx.AsyncClient(limits=limits, timeout=30.0) as http,
    ):
        await on_start()
        started = time.monotonic()
        fleet = Fleet(control, http, proxy_url, records, started, started + seconds)
        tasks = [
            asyncio.create_task(
                fleet.worker(tenant, i, seed=zlib.crc32(f"{tenant.name}/{i}".encode()))
            )
            for tenant, count in workers.items()
            for i in range(count)
        ]
        await asyncio.sleep(seconds)
        await on_stop()
        _, pending = await asyncio.wait(tasks, timeout=grace_s)
        for leftover in pending:
            leftover.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return records
