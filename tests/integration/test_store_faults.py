"""Store faults against real processes: Postgres and Redis partitioned (blackholed) and
crashed (refused) under a running control plane and proxy, through TCP relays.

What a user would notice: every answer arrives within the store deadlines (503 `unavailable`
with a retry hint, never a hang), a proxy keeps serving the keys it already knows while the
database is out, and everything recovers by itself when the store returns.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pytest

from tests.fixtures.faults import (
    ANSWER_WITHIN_S,
    FaultyGateway,
    assert_unavailable,
    eventually,
    faulty_gateway,
    timed,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres, pytest.mark.redis]

READYZ_WITHIN_S = 5.0
RECOVER_WITHIN_S = 15.0


async def assert_unready(client: httpx.AsyncClient, url: str, store: str) -> None:
    response, took = await timed(client.get(f"{url}/readyz"))
    assert response.status_code == 503, response.text
    assert took < READYZ_WITHIN_S, f"/readyz took {took:.1f} s"
    assert response.json()["checks"][store].startswith("unreachable"), response.text


async def ready(gateway: FaultyGateway, *urls: str) -> bool:
    for url in urls:
        if (await gateway.client.get(f"{url}/readyz")).status_code != 200:
            return False
    return True


async def test_store_partitions_and_crashes_under_running_processes(tmp_path: Path) -> None:
    """One stack, three faults in turn (each ends recovered, so the next starts clean)."""
    async with faulty_gateway(tmp_path) as gw:
        await postgres_partition(gw)
        await redis_partition(gw)
        await redis_crash_with_slots_held(gw)


async def postgres_partition(gw: FaultyGateway) -> None:
    """Answers in time, known keys keep serving, recovery without a restart."""
    known = await gw.minted_key(dispatch_id="d-known")
    assert (await gw.chat(known)).status_code == 200  # now in the proxy's key cache
    unseen = await gw.minted_key(dispatch_id="d-unseen")  # minted, never presented to the proxy
    await asyncio.sleep(1.2)  # the key cache (1 s) has aged out: the database is asked

    gw.postgres.mode = "blackhole"
    minted, took = await timed(gw.mint(dispatch_id="d-during"))
    assert_unavailable(minted)
    assert took < ANSWER_WITHIN_S, f"mint answered after {took:.1f} s"

    refused, took = await timed(gw.chat(unseen))
    assert_unavailable(refused)
    assert took < ANSWER_WITHIN_S, f"unknown key answered after {took:.1f} s"

    for _ in range(3):
        served, took = await timed(gw.chat(known))
        assert served.status_code == 200, served.text
        assert took < ANSWER_WITHIN_S
    await assert_unready(gw.client, gw.control_url, "database")
    await assert_unready(gw.client, gw.proxy_url, "database")

    gw.postgres.mode = "pass"
    await eventually(lambda: ready(gw, gw.control_url, gw.proxy_url), RECOVER_WITHIN_S)
    assert (await gw.chat(unseen)).status_code == 200
    assert (await gw.mint(dispatch_id="d-after")).status_code == 201


async def redis_partition(gw: FaultyGateway) -> None:
    key = await gw.minted_key(dispatch_id="d-1")
    assert (await gw.chat(key)).status_code == 200

    gw.redis.mode = "blackhole"
    refused, took = await timed(gw.chat(key))
    assert_unavailable(refused)
    assert took < ANSWER_WITHIN_S, f"proxy answered after {took:.1f} s"
    minted, took = await timed(gw.mint(dispatch_id="d-2"))
    assert_unavailable(minted)
    assert took < ANSWER_WITHIN_S, f"mint answered after {took:.1f} s"
    await assert_unready(gw.client, gw.control_url, "redis")
    await assert_unready(gw.client, gw.proxy_url, "redis")

    gw.redis.mode = "pass"
    await eventually(lambda: ready(gw, gw.control_url, gw.proxy_url), RECOVER_WITHIN_S)
    assert (await gw.chat(key)).status_code == 200
    assert (await gw.mint(dispatch_id="d-2")).status_code == 201


async def redis_crash_with_slots_held(gw: FaultyGateway) -> None:
    """Releases that fail while Redis is down land when it returns; stale pooled connections
    do not fail a burst."""
    open_key = await gw.minted_key(dispatch_id="d-open", model="o")
    # many pooled Redis connections in the proxy, all about to go stale
    assert await burst(gw, open_key) == [200] * 30

    slow = [await gw.minted_key(dispatch_id=f"d-slow-{i}", model="slow") for i in range(3)]
    streams = [asyncio.create_task(gw.chat(key, model="slow", stream=True)) for key in slow]
    await eventually(lambda: _in_flight_is(gw, 3), 10)
    gw.redis.mode = "refuse"  # Redis crashes while three streams hold slots
    done = await asyncio.gather(*streams)  # their releases fail: Redis is down
    assert {r.status_code for r in done} == {200}

    gw.redis.mode = "pass"
    await eventually(lambda: _in_flight_is(gw, 0), 5)  # far sooner than the 30 s lease
    assert await burst(gw, open_key) == [200] * 30
    assert (await gw.chat(await gw.minted_key(dispatch_id="d-main"))).status_code == 200
    await eventually(lambda: _in_flight_is(gw, 0), 5)


async def burst(gw: FaultyGateway, key: str) -> list[int]:
    responses = await asyncio.gather(*(gw.chat(key, model="o") for _ in range(30)))
    return [r.status_code for r in responses]


async def _in_flight_is(gw: FaultyGateway, count: int) -> bool:
    return await gw.requests_in_flight("main") == count


async def test_processes_started_with_their_stores_down_bind_ready_later_and_stop(
    tmp_path: Path,
) -> None:
    """Control plane with Postgres down, proxy with Redis down: both bind at once."""
    async with faulty_gateway(tmp_path, postgres_mode="refuse", redis_mode="refuse") as gw:
        for url, store in ((gw.control_url, "database"), (gw.proxy_url, "redis")):
            assert (await gw.client.get(f"{url}/healthz")).status_code == 200
            await assert_unready(gw.client, url, store)
        refused, took = await timed(gw.mint(dispatch_id="d-1"))
        assert_unavailable(refused)
        assert took < ANSWER_WITHIN_S

        await asyncio.sleep(3)  # a few reconnection rounds while Redis stays down
        gw.postgres.mode = gw.redis.mode = "pass"
        await eventually(lambda: ready(gw, gw.control_url, gw.proxy_url), RECOVER_WITHIN_S)
        key = await gw.minted_key(dispatch_id="d-1")
        assert (await gw.chat(key)).status_code == 200

        lines = [json.loads(line) for line in gw.log_lines("proxy") if line.startswith("{")]
        down = [line for line in lines if "subscription down" in line.get("event", "")]
        assert 1 <= len(down) <= 2, down  # backed off: one line, not one per attempt
        assert all(line.get("store") == "redis" for line in down)
        assert "127.0.0.1" not in json.dumps(down)  # the store's name, never its URL

        # and each stops on its signal, within the drain, while its store is down again
        gw.postgres.mode = gw.redis.mode = "refuse"
        gw.processes["proxy"].send_signal(signal.SIGTERM)
        gw.processes["control-plane"].send_signal(signal.SIGINT)
        for command in ("proxy", "control-plane"):
            # the drain is 2 s; the margin covers interpreter exit on a loaded machine
            await asyncio.to_thread(gw.processes[command].wait, 15)
            # uvicorn re-raises the signal once shut down: the exit status names it
            assert "Application shutdown complete" in gw.log_lines(command)[-2]
