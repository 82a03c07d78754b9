"""Both ceilings through real HTTP, in production mode: two control-plane processes and two
proxy processes over one Postgres and one Redis (SPEC §3 lease capacity and one live lease per
dispatch, §4 request capacity, §5 invariants 1-3)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack

import httpx
import pytest
import pytest_asyncio

from leasegate.kv.keys import slots_key as slots_key_of
from tests.fixtures.cluster import READY_WITHIN_S, SLOT_LEASE_S, Cluster, process_cluster
from tests.fixtures.processes import PRODUCTION_PROCESSES_MODULE, start_processes

pytestmark = PRODUCTION_PROCESSES_MODULE

FULL = "lease-capacity-exhausted"
Opened = tuple[httpx.Response, AsyncIterator[bytes]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    async with process_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


async def _mint_many(
    cluster: Cluster, controls: list[str], tenant: str, model: str, count: int
) -> list[httpx.Response]:
    return list(
        await asyncio.gather(
            *(
                cluster.at(control_url=controls[i % len(controls)]).mint(
                    tenant=tenant, dispatch_id=f"d-{i}", model=model
                )
                for i in range(count)
            )
        )
    )


async def _revoke_all(cluster: Cluster, minted: list[httpx.Response]) -> None:
    """Every key revoked at once, through both control planes in turn."""
    key_ids = [response.json()["key_id"] for response in minted]
    revoked = await asyncio.gather(
        *(
            cluster.at(control_url=cluster.controls[i % 2]).revoke(key_id)
            for i, key_id in enumerate(key_ids)
        )
    )
    assert {response.status_code for response in revoked} == {204}


async def _settles_at_zero(cluster: Cluster, account_id: str) -> None:
    """Slots go back as each response ends, a moment after the client has read it."""
    for _ in range(100):
        if (await cluster.account(account_id))["requests_in_flight"] == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{account_id} still has requests in flight")


@pytest.mark.parametrize("replicas", [1, 2])
async def test_200_concurrent_mints_take_exactly_the_lease_capacity(
    cluster: Cluster, replicas: int
) -> None:
    controls = cluster.controls[:replicas]

    responses = await _mint_many(cluster, controls, f"t-solo-{replicas}", "solo-model", 200)

    created = [r for r in responses if r.status_code == 201]
    refused = [r for r in responses if r.status_code != 201]
    assert len(created) == 10
    assert {r.status_code for r in refused} == {503}
    for response in refused:
        error = response.json()["error"]
        assert error["code"] == "no-eligible-account"
        assert error["passed_over"] == [{"account_id": "solo", "code": FULL}]
    for control in cluster.controls:  # every replica reads the same truth
        view = await cluster.at(control_url=control).account("solo")
        assert (view["leases_held"], view["lease_capacity"]) == (10, 10)
        assert 'leasegate_account_leases_held{account="solo"} 10.0' in await cluster.metrics(
            control
        )

    await _revoke_all(cluster, created)

    for control in cluster.controls:
        assert (await cluster.at(control_url=control).account("solo"))["leases_held"] == 0
        assert 'leasegate_account_leases_held{account="solo"} 0.0' in await cluster.metrics(control)


async def test_with_a_second_account_in_the_pool_the_rest_land_on_it(cluster: Cluster) -> None:
    responses = await _mint_many(cluster, cluster.controls, "t-pool", "pool-model", 200)

    assert {r.status_code for r in responses} == {201}
    minted = [r.json() for r in responses]
    on_pooled = [m for m in minted if m["account_id"] == "pooled"]
    on_overflow = [m for m in minted if m["account_id"] == "overflow"]
    assert len(on_pooled) == 10
    assert len(on_overflow) == 190
    assert all(m["passed_over"] == [] for m in on_pooled)
    for m in on_overflow:
        assert m["fallback_position"] == 1
        assert m["passed_over"] == [{"account_id": "pooled", "code": FULL}]
    assert (await cluster.account("pooled"))["leases_held"] == 10
    assert (await cluster.account("overflow"))["leases_held"] == 190

    await _revoke_all(cluster, responses)

    for account_id in ("pooled", "overflow"):
        assert (await cluster.at(control_url=cluster.controls[1]).account(account_id))[
            "leases_held"
        ] == 0


async def test_50_concurrent_mints_for_one_dispatch_leave_one_live_lease(
    cluster: Cluster,
) -> None:
    responses = await asyncio.gather(
        *(
            cluster.at(control_url=cluster.controls[i % 2]).mint(
                tenant="t-dispatch", dispatch_id="d-81", model="free-model"
            )
            for i in range(50)
        )
    )

    created = [r for r in responses if r.status_code == 201]
    assert len(created) == 1
    refused = [r for r in responses if r.status_code != 201]
    assert {r.status_code for r in refused} == {409}
    assert {r.json()["error"]["code"] for r in refused} == {"dispatch-lease-held"}
    assert (await cluster.account("free"))["leases_held"] == 1

    await _revoke_all(cluster, created)  # revoking frees the dispatch for its next mint
    again = await cluster.at(control_url=cluster.controls[1]).mint(
        tenant="t-dispatch", dispatch_id="d-81", model="free-model"
    )
    assert again.status_code == 201, again.text
    await _revoke_all(cluster, [again])


async def test_100_streams_through_two_proxies_never_exceed_the_request_capacity(
    cluster: Cluster,
) -> None:
    keys = [
        await cluster.minted_key(tenant=tenant, model="slow-model")
        for tenant in ("t-slots", "t-slots-2")
    ]
    cluster.slow.max_in_flight = 0
    before = cluster.slow.count

    async def stream(i: int) -> tuple[int, bytes]:
        proxied = cluster.at(proxy_url=cluster.proxies[i % 2])
        async with proxied.open_chat(keys[i % 2], model="slow-model") as response:
            return response.status_code, await response.aread()

    results = await asyncio.gather(*(stream(i) for i in range(100)))

    ok = [body for status, body in results if status == 200]
    limited = [body for status, body in results if status == 429]
    others = {(status, body[:300]) for status, body in results if status not in (200, 429)}
    assert len(ok) + len(limited) == 100, others
    assert len(ok) >= 5
    assert all(body.rstrip().endswith(b"data: [DONE]") for body in ok)  # whole streams
    assert {httpx.Response(429, content=b).json()["error"]["code"] for b in limited} == {
        "account-request-capacity-exhausted"
    }
    assert cluster.slow.max_in_flight <= 5  # the mock counted: never more than the ceiling
    assert cluster.slow.count - before == len(ok)  # a refused request never reached it
    await _settles_at_zero(cluster, "slots")
    view = await cluster.at(control_url=cluster.controls[1]).account("slots")
    assert (view["requests_in_flight"], view["request_capacity"]) == (0, 5)


async def test_accounts_without_a_request_ceiling_report_no_count(cluster: Cluster) -> None:
    view = await cluster.account("free")
    assert (view["requests_in_flight"], view["request_capacity"]) == (None, None)
    metrics = await cluster.metrics(cluster.controls[0])
    assert 'leasegate_account_request_capacity{account="slots"} 5.0' in metrics
    assert 'leasegate_account_requests_in_flight{account="slots"} 0.0' in metrics
    assert 'leasegate_account_lease_capacity{account="solo"} 10.0' in metrics
    assert 'leasegate_account_requests_in_flight{account="free"}' not in metrics
    assert 'leasegate_account_request_capacity{account="free"}' not in metrics


async def _open_streams(
    cluster: Cluster, streams: AsyncExitStack, proxy: str, key: str, count: int
) -> list[Opened]:
    """`count` streams, each past its first chunk: admitted, holding a slot, still running.

    The caller keeps the iterators: one dropped would close its stream (a client abort).
    """
    opened = []
    for _ in range(count):
        response = await streams.enter_async_context(
            cluster.at(proxy_url=proxy).open_chat(key, model="stuck-model")
        )
        assert response.status_code == 200, await response.aread()
        chunks = response.aiter_raw()
        await anext(chunks)
        opened.append((response, chunks))
    return opened


async def _close(opened: list[Opened]) -> None:
    for response, _ in opened:
        with contextlib.suppress(httpx.HTTPError):  # a killed proxy's connection is gone
            await response.aclose()


async def test_a_proxy_killed_mid_stream_gives_its_slots_back_within_the_lease(
    cluster: Cluster,
) -> None:
    key = await cluster.minted_key(tenant="t-crash", model="stuck-model")
    slots_key = slots_key_of(cluster.prefix, "crash")
    victim_env = {**cluster.env, "LEASEGATE_REQUEST_SLOT_LEASE_S": str(SLOT_LEASE_S)}
    with ExitStack() as processes:
        ((victim, process),) = await start_processes(
            processes, victim_env, ["proxy"], ready_within_s=READY_WITHIN_S
        )
        async with AsyncExitStack() as streams:
            doomed = await _open_streams(cluster, streams, victim, key, 3)
            assert (await cluster.account("crash"))["requests_in_flight"] == 3

            process.kill()
            dead_at = time.time()
            await asyncio.to_thread(process.wait, 10)
            await _close(doomed)
            # The stored leases prove the bound exactly: each was still counting at the
            # moment of death (held, not released), and each ends within one lease of it.
            stored = await cluster.redis.zrange(slots_key, 0, -1, withscores=True)
            scores = [float(pair[1]) for pair in stored]
            assert len(scores) == 3
            assert all(dead_at < score <= dead_at + SLOT_LEASE_S for score in scores), scores
            while (await cluster.account("crash"))["requests_in_flight"] > 0:
                assert time.time() - dead_at < SLOT_LEASE_S + 5, "slots leaked past the lease"
                await asyncio.sleep(0.05)

    # The whole ceiling is back: five streams on a surviving proxy, the sixth refused.
    async with AsyncExitStack() as streams:
        held = await _open_streams(cluster, streams, cluster.proxies[0], key, 5)
        async with cluster.at(proxy_url=cluster.proxies[1]).open_chat(
            key, model="stuck-model"
        ) as sixth:
            assert sixth.status_code == 429
        assert (await cluster.account("crash"))["requests_in_flight"] == 5
        await _close(held)  # the client goes away: each slot comes back at once
    await _settles_at_zero(cluster, "crash")
