"""`python -m bench.spend_hostile`: ways round a budget, tried, and the overshoot measured.

Loopback, about a minute. Each way runs a gateway in this process (`leasegate dev`'s app in
production mode: a fresh Postgres database, Redis), a mock upstream that answers every
non-streaming chat with 16 tokens after `--latency` seconds, and a tenant (or a dispatch)
whose budget is 49 tokens (three requests, then the fourth crosses it). It prints, per way:
requests served, the spend recorded in evidence (`/usage`, the truth), the overshoot over the
budget, and the documented bound for that way (docs/spend.md, "Hostile spend").

    sequential          one request at a time (the bound: the one crossing request, < 16)
    concurrent burst    --burst requests at once on one tenant (bound: burst x 16)
    second proxy        two replicas (each both APIs) on the same stores, alternating
    burst, two proxies  --burst at once, split between the two replicas
    redis restart       spent, then a redis-server of this run's own restarted without
                        persistence, then --after more requests (bound: 0 more served)
    redis restart burst the same, --burst requests at once right after the restart
    corrupt chain       spent, then a budget record edited and the gateway restarted on it:
                        --after more requests (bound: 0 served, all 503)
    dispatch + restart  a dispatch budget spent, Redis restarted, --after more (bound: 0)
    plain stream        a dispatch budget spent by streams that never ask for their usage
                        (no `stream_options`): the bound is the sequential one
    abort after finish  each stream hung up on as soon as its `finish_reason` arrives, before
                        the usage chunk (50 ms later): the same bound
    renewal             a dispatch budget, its key renewed after two requests: the renewed key
                        spends the chain's remainder, the same bound
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from leasegate.db import Database
from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateway_client import GatewayClient
from tests.fixtures.gateways import ADMIN_TOKEN, account_entry, gateway_env, in_process_gateway
from tests.fixtures.own_redis import OwnRedis, own_redis
from tests.fixtures.services import StoresEnv, production_stores

PER_REQUEST = 16
BUDGET = 3 * PER_REQUEST + 1
PRICES = {"input": "2.50", "output": "10.00", "cache_read": "1.25"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass
class Outcome:
    way: str
    served: int
    refused: dict[str, int]
    spent: int
    bound: str

    @property
    def overshoot(self) -> int:
        return max(0, self.spent - BUDGET)


@dataclass
class Run:
    latency_s: float
    burst: int
    after: int
    root: Path


def _env(root: Path, upstream: MockUpstream, stores: StoresEnv) -> dict[str, str]:
    priced = {"served": "gpt-4o-a", "prices": PRICES}
    root.mkdir(parents=True, exist_ok=True)
    return gateway_env(
        root,
        [account_entry("primary", upstream, {"gpt-4o": priced})],  # type: ignore[dict-item]
        **stores,
        currency="USD",
    )


async def _budget(gw: GatewayClient, tenant: str) -> int:
    revision = int((await gw.control_get("/accounts"))["revision"])
    answer = await gw.client.post(
        f"{gw.control_url}/control/v2/tenants/{tenant}/budget",
        json={
            "reason": "bench",
            "expected_revision": revision,
            "period": "day",
            "max_tokens": BUDGET,
        },
        headers=ADMIN,
    )
    answer.raise_for_status()
    await asyncio.sleep(1.1)  # every proxy knows it
    return int(answer.json()["record"]["seq"])


async def _spent(gw: GatewayClient, tenant: str) -> int:
    await asyncio.sleep(1.5)  # the rows written
    report = await gw.control_get("/usage?group_by=tenant&limit=1000")
    return sum(
        int(g["input_tokens"]) + int(g["output_tokens"])
        for g in report["usage"]
        if g["tenant"] == tenant
    )


class Tally:
    def __init__(self) -> None:
        self.served = 0
        self.refused: dict[str, int] = {}

    async def chat(self, gw: GatewayClient, key: dict[str, Any]) -> None:
        answer = await gw.chat(key)
        if answer.status_code == 200:
            self.served += 1
        else:
            code = str(answer.json()["error"]["code"])
            self.refused[code] = self.refused.get(code, 0) + 1

    async def until_refused(self, gw: GatewayClient, key: dict[str, Any], limit: int = 20) -> None:
        for _ in range(limit):
            before = self.served
            await self.chat(gw, key)
            if self.served == before:
                return


@asynccontextmanager
async def _site(
    run: Run, name: str, redis: OwnRedis | None = None, *, chunk_delay_s: float = 0.0
) -> AsyncIterator[tuple[dict[str, str], MockUpstream]]:
    def slow(_: MockRequest) -> Reply:
        return Reply(headers_delay_s=run.latency_s, chunk_delay_s=chunk_delay_s)

    async with production_stores() as stores, MockUpstream(slow, chunks=4) as upstream:
        mine: StoresEnv = {**stores, "redis_url": redis.url} if redis is not None else stores
        yield _env(run.root / name, upstream, mine), upstream


async def sequential(run: Run) -> Outcome:
    async with _site(run, "sequential") as (env, _), in_process_gateway(env) as gw:
        tenant = f"seq/{secrets.token_hex(3)}"
        await _budget(gw, tenant)
        key = await gw.minted(tenant=tenant, dispatch_id="d-1")
        tally = Tally()
        await tally.until_refused(gw, key)
        spent = await _spent(gw, tenant)
    return Outcome("sequential", tally.served, tally.refused, spent, "< 16 (one request)")


async def burst(run: Run) -> Outcome:
    async with _site(run, "burst") as (env, _), in_process_gateway(env) as gw:
        tenant = f"burst/{secrets.token_hex(3)}"
        await _budget(gw, tenant)
        keys = [await gw.minted(tenant=tenant, dispatch_id=f"d-{i}") for i in range(run.burst)]
        tally = Tally()
        await asyncio.gather(*(tally.chat(gw, k) for k in keys))
        spent = await _spent(gw, tenant)
    bound = f"< {run.burst * PER_REQUEST} ({run.burst} x 16)"
    return Outcome(f"concurrent burst ({run.burst})", tally.served, tally.refused, spent, bound)


async def two_proxies(run: Run, *, concurrent: bool) -> Outcome:
    name = "two-burst" if concurrent else "two"
    async with (
        _site(run, name) as (env, _),
        in_process_gateway(env) as one,
        in_process_gateway(env) as two,
    ):
        tenant = f"two/{secrets.token_hex(3)}"
        await _budget(one, tenant)
        tally = Tally()
        if concurrent:
            keys = [await one.minted(tenant=tenant, dispatch_id=f"d-{i}") for i in range(run.burst)]
            sides = [one if i % 2 else two for i in range(run.burst)]
            await asyncio.gather(*(tally.chat(s, k) for s, k in zip(sides, keys, strict=True)))
        else:
            key = await one.minted(tenant=tenant, dispatch_id="d-1")
            for i in range(20):
                before = tally.served
                await tally.chat(one if i % 2 else two, key)
                if tally.served == before:
                    break
        spent = await _spent(one, tenant)
    if concurrent:
        way, bound = f"burst over two proxies ({run.burst})", f"< {run.burst * PER_REQUEST}"
    else:
        way, bound = "second proxy, alternating", "< 16 (one request)"
    return Outcome(way, tally.served, tally.refused, spent, bound)


async def redis_restart(run: Run, *, concurrent: bool) -> Outcome:
    with own_redis(run.root / "redis") as redis:
        async with _site(run, "restart", redis) as (env, _), in_process_gateway(env) as gw:
            tenant = f"restart/{secrets.token_hex(3)}"
            await _budget(gw, tenant)
            key = await gw.minted(tenant=tenant, dispatch_id="d-1")
            before = Tally()
            await before.until_refused(gw, key)
            await _spent(gw, tenant)
            redis.restart()
            await asyncio.sleep(0.5)  # the clients reconnect
            tally = Tally()
            if concurrent:
                await asyncio.gather(*(tally.chat(gw, key) for _ in range(run.burst)))
            else:
                for _ in range(run.after):
                    await tally.chat(gw, key)
            spent = await _spent(gw, tenant)
    way = f"Redis restart, then a burst of {run.burst}" if concurrent else "Redis restart"
    return Outcome(way, before.served + tally.served, tally.refused, spent, "0 more served")


async def dispatch_restart(run: Run) -> Outcome:
    with own_redis(run.root / "redis-d") as redis:
        async with _site(run, "dispatch", redis) as (env, _), in_process_gateway(env) as gw:
            tenant = f"dispatch/{secrets.token_hex(3)}"
            key = await gw.minted(tenant=tenant, dispatch_id="d-1", budget={"max_tokens": BUDGET})
            before = Tally()
            await before.until_refused(gw, key)
            await _spent(gw, tenant)
            redis.restart()
            await asyncio.sleep(0.5)
            tally = Tally()
            for _ in range(run.after):
                await tally.chat(gw, key)
            spent = await _spent(gw, tenant)
    return Outcome(
        "dispatch budget, Redis restart",
        before.served + tally.served,
        tally.refused,
        spent,
        "0 more served",
    )


async def corrupt_chain(run: Run) -> Outcome:
    async with _site(run, "corrupt") as (env, _):
        tenant = f"corrupt/{secrets.token_hex(3)}"
        async with in_process_gateway(env) as gw:
            seq = await _budget(gw, tenant)
            key = await gw.minted(tenant=tenant, dispatch_id="d-1")
            before = Tally()
            await before.until_refused(gw, key)
        db = Database.connect(env["LEASEGATE_DATABASE_URL"])
        try:
            async with db.engine.begin() as connection:
                await connection.execute(text("ALTER TABLE audit_records DISABLE TRIGGER USER"))
                await connection.execute(
                    text("UPDATE audit_records SET max_tokens = 10000000 WHERE seq = :s"),
                    {"s": seq},
                )
                await connection.execute(text("ALTER TABLE audit_records ENABLE TRIGGER USER"))
        finally:
            await db.dispose()
        async with in_process_gateway(env) as gw:  # a proxy started on the edited chain
            tally = Tally()
            for _ in range(run.after):
                await tally.chat(gw, key)
            spent = await _spent(gw, tenant)
    return Outcome(
        "corrupt chain, proxy restarted on it",
        before.served + tally.served,
        tally.refused,
        spent,
        "0 more served",
    )


async def plain_stream(run: Run) -> Outcome:
    async with _site(run, "stream") as (env, _), in_process_gateway(env) as gw:
        tenant = f"stream/{secrets.token_hex(3)}"
        key = await gw.minted(tenant=tenant, dispatch_id="d-1", budget={"max_tokens": BUDGET})
        tally = Tally()
        for _ in range(20):
            answer = await gw.chat(key, stream=True)  # no stream_options: never asked
            if answer.status_code != 200:
                code = str(answer.json()["error"]["code"])
                tally.refused[code] = tally.refused.get(code, 0) + 1
                break
            tally.served += 1
        spent = await _spent(gw, tenant)
    return Outcome("plain stream, no stream_options", tally.served, tally.refused, spent, "< 16")


async def abort_after_finish(run: Run) -> Outcome:
    async with (
        _site(run, "abort", chunk_delay_s=0.05) as (env, _),
        in_process_gateway(env) as gw,
    ):
        tenant = f"abort/{secrets.token_hex(3)}"
        key = await gw.minted(tenant=tenant, dispatch_id="d-1", budget={"max_tokens": BUDGET})
        tally = Tally()
        for _ in range(20):
            async with gw.open_chat(key) as answer:
                if answer.status_code != 200:
                    body = json.loads(await answer.aread())
                    code = str(body["error"]["code"])
                    tally.refused[code] = tally.refused.get(code, 0) + 1
                    break
                async for line in answer.aiter_lines():
                    if '"finish_reason":"stop"' in line.replace(" ", ""):
                        break  # hang up: the usage chunk is still 50 ms away
            tally.served += 1
            await asyncio.sleep(0.3)  # the proxy reads on for the usage, then writes the row
        spent = await _spent(gw, tenant)
    return Outcome("abort after finish_reason", tally.served, tally.refused, spent, "< 16")


async def renewal(run: Run) -> Outcome:
    async with _site(run, "renewal") as (env, _), in_process_gateway(env) as gw:
        tenant = f"renew/{secrets.token_hex(3)}"
        key = await gw.minted(tenant=tenant, dispatch_id="d-1", budget={"max_tokens": BUDGET})
        tally = Tally()
        for _ in range(2):
            await tally.chat(gw, key)
        renewed = await gw.client.post(
            f"{gw.control_url}/control/v2/keys/{key['key_id']}/renew",
            json={},
            headers=gw.control_headers,
        )
        renewed.raise_for_status()
        await tally.until_refused(gw, renewed.json())
        spent = await _spent(gw, tenant)
    return Outcome("renewal mid-chain", tally.served, tally.refused, spent, "< 16")


def _row(o: Outcome) -> str:
    refused = ", ".join(f"{n} {c}" for c, n in sorted(o.refused.items())) or "-"
    return f"| {o.way} | {o.served} | {refused} | {o.spent} | {o.overshoot} | {o.bound} |"


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spend_hostile")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--burst", type=int, default=16)
    parser.add_argument("--after", type=int, default=10)
    parser.add_argument("--only", default="", help="comma-separated way numbers (1-based)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lg-spend-") as root:
        run = Run(args.latency, args.burst, args.after, Path(root))
        ways: list[Callable[[], Awaitable[Outcome]]] = [
            lambda: sequential(run),
            lambda: burst(run),
            lambda: two_proxies(run, concurrent=False),
            lambda: two_proxies(run, concurrent=True),
            lambda: redis_restart(run, concurrent=False),
            lambda: redis_restart(run, concurrent=True),
            lambda: dispatch_restart(run),
            lambda: corrupt_chain(run),
            lambda: plain_stream(run),
            lambda: abort_after_finish(run),
            lambda: renewal(run),
        ]
        print(
            f"budget {BUDGET} tokens; {PER_REQUEST} tokens a request; upstream latency "
            f"{args.latency} s"
        )
        print(
            "| way | served | refused (after the crossing) | spent (evidence) | overshoot | bound |"
        )
        print("|---|---|---|---|---|---|")
        chosen = {int(n) for n in args.only.split(",") if n.strip()}
        for number, way in enumerate(ways, start=1):
            if not chosen or number in chosen:
                print(_row(await way()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
