"""Bounded fallback through real HTTP and real stores: a two-account pool on two upstreams whose
first account fails, hops licensed only by the gateway's own evidence, idempotent mint.
Every test runs in embedded mode (SQLite) and production mode (Postgres + Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.demo.upstream import Reply
from tests.fixtures.gateways import Gateway
from tests.fixtures.pool import Pool, two_upstream_pool
from tests.fixtures.services import StoresEnv

TENANT = "acme/web"


PoolFactory = Callable[..., AbstractAsyncContextManager[Pool]]


@pytest.fixture
def make_pool(tmp_path: Path, stores_env: StoresEnv) -> PoolFactory:
    """The two-account pool of `tests.fixtures.pool`; only the primary's answers are scripted.
    `solo` is served by the primary only: a hop has nowhere to go."""

    def pool(extra: Mapping[str, str] | None = None) -> AbstractAsyncContextManager[Pool]:
        return two_upstream_pool(tmp_path, stores_env, extra)

    return pool


async def _revoke(gw: Gateway, key_id: str) -> None:
    response = await gw.revoke(key_id)
    assert response.status_code == 204


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert error["mint_decision_id"].startswith("md_")  # every refused mint is a decision
    return error


async def _failed_on_primary(pool: Pool, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Mint on the primary, call it once (the script decides how that ends), wait for the row."""
    gw = pool.gateway
    minted = await gw.minted(**body)
    assert (minted["account_id"], minted["fallback_position"], minted["hop"]) == ("primary", 0, 0)
    await gw.chat(minted["key"], model=body.get("model", "gpt-4o"))
    (row,) = await gw.evidence_for(minted["mint_decision_id"])
    return minted, row


@asynccontextmanager
async def _lease_watch(gw: Gateway) -> AsyncIterator[list[int]]:
    """Samples the live leases of every account (one dispatch runs) until the block ends."""
    samples: list[int] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            view = await gw.control_get("/accounts")
            samples.append(sum(a["leases_held"] for a in view["accounts"]))
            await asyncio.sleep(0.01)

    task = asyncio.create_task(watch())
    try:
        yield samples
    finally:
        stop.set()
        await task


async def test_a_429_hops_to_the_second_account_on_another_upstream(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        async with _lease_watch(gw) as leases:
            hop, row, cited = await _hop_scenario(pool)
        assert leases
        assert max(leases) <= 1  # at most one live lease of the dispatch at every sample
        await _hop_is_recorded(gw, hop, row, cited)


async def _hop_scenario(pool: Pool) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Mint, 429, retry too early, revoke, hop to the backup, succeed, try to branch."""
    gw = pool.gateway
    pool.primary_script.reply = Reply(status=429)
    first, row = await _failed_on_primary(pool)
    assert (row["outcome"], row["upstream_status"], row["qualifying"]) == (
        "upstream-error",
        429,
        True,
    )
    cited = first["mint_decision_id"]

    early = await gw.mint(retry_of_mint_decision_id=cited)
    error = _error(early, 503, "fallback-lease-still-held")
    assert error["disposition"] == "held"
    assert early.headers["retry-after"] == "1"

    await _revoke(gw, first["key_id"])
    hop = await gw.minted(retry_of_mint_decision_id=cited)
    assert (hop["account_id"], hop["fallback_position"], hop["hop"]) == ("backup", 1, 1)
    assert hop["served_model"] == "gpt-4o-b"

    answer = await gw.chat(hop["key"])
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-leasegate-account"] == "backup"
    assert (pool.primary.count, pool.backup.count) == (1, 1)
    assert pool.primary.url != pool.backup.url
    seen = pool.backup.requests[-1]
    assert seen.headers["authorization"] == "Bearer sk-secret-backup"

    again = await gw.mint(retry_of_mint_decision_id=cited)
    error = _error(again, 409, "fallback-cited-decision-superseded")
    assert error["disposition"] == "rejected"
    assert error["successor_mint_decision_id"] == hop["mint_decision_id"]
    return hop, row, cited


async def _hop_is_recorded(
    gw: Gateway, hop: dict[str, Any], row: dict[str, Any], cited: str
) -> None:
    hop_view = await gw.control_get(f"/decisions/{hop['mint_decision_id']}")
    assert hop_view["kind"] == "retry"
    assert hop_view["retry_of_mint_decision_id"] == cited
    assert hop_view["authorised_by_request_id"] == row["request_id"]
    cited_view = await gw.control_get(f"/decisions/{cited}")
    assert cited_view["successor_mint_decision_id"] == hop["mint_decision_id"]

    listed = await gw.control_get(f"/decisions?tenant={TENANT}&dispatch_id=d-1")
    assert [(d["kind"], d["outcome"], d["refusal_code"]) for d in listed["decisions"]] == [
        ("fresh", "selected", None),
        ("retry", "refused", "fallback-lease-still-held"),
        ("retry", "selected", None),
        ("retry", "refused", "fallback-cited-decision-superseded"),
    ]
    assert listed["decisions"][0]["evidence"][0]["request_id"] == row["request_id"]


async def test_no_hop_with_a_budget_of_zero(make_pool: PoolFactory) -> None:
    async with make_pool({"LEASEGATE_MAX_FALLBACK_HOPS": "0"}) as pool:
        pool.primary_script.reply = Reply(status=429)
        first, _ = await _failed_on_primary(pool)
        await _revoke(pool.gateway, first["key_id"])
        held = await pool.gateway.mint(retry_of_mint_decision_id=first["mint_decision_id"])
        assert _error(held, 503, "fallback-budget-exhausted")["disposition"] == "held"
        assert held.headers["retry-after"]
        assert pool.backup.count == 0


async def test_a_400_or_a_client_abort_does_not_license_a_hop(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        pool.primary_script.reply = Reply(status=400)
        first, row = await _failed_on_primary(pool)
        assert (row["upstream_status"], row["qualifying"]) == (400, False)
        await _revoke(gw, first["key_id"])
        held = await gw.mint(retry_of_mint_decision_id=first["mint_decision_id"])
        assert _error(held, 503, "fallback-not-authorised")["disposition"] == "held"

        pool.primary_script.reply = Reply(chunk_delay_s=0.3)
        aborted = await gw.minted(dispatch_id="d-2")
        async with gw.client.stream(
            "POST",
            f"{gw.url}/v1/chat/completions",
            json={
                "model": "gpt-4o",
                "stream": True,
                "messages": [{"role": "user", "content": "x"}],
            },
            headers={"Authorization": f"Bearer {aborted['key']}"},
        ) as response:
            assert response.status_code == 200
            async for _ in response.aiter_raw():
                break  # the client goes away after the first chunk
        (row,) = await gw.evidence_for(aborted["mint_decision_id"])
        assert (row["outcome"], row["qualifying"]) == ("client-abort", False)
        await _revoke(gw, aborted["key_id"])
        held = await gw.mint(dispatch_id="d-2", retry_of_mint_decision_id=row["mint_decision_id"])
        _error(held, 503, "fallback-not-authorised")
        assert pool.backup.count == 0


async def test_citations_that_can_never_hop(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        first = await gw.minted()
        cited = first["mint_decision_id"]

        unknown = await gw.mint(retry_of_mint_decision_id="md_000000000000000000000000")
        assert _error(unknown, 503, "fallback-lineage-unknown")["disposition"] == "held"
        assert unknown.headers["retry-after"]

        other = await gw.mint(dispatch_id="d-other", retry_of_mint_decision_id=cited)
        assert _error(other, 409, "fallback-lineage-mismatch")["disposition"] == "rejected"
        other_model = await gw.mint(model="solo", retry_of_mint_decision_id=cited)
        _error(other_model, 409, "fallback-lineage-mismatch")

        held = await gw.mint()  # the dispatch's lease is live: a refused decision
        refused_id = _error(held, 409, "dispatch-lease-held")["mint_decision_id"]
        not_selected = await gw.mint(retry_of_mint_decision_id=refused_id)
        _error(not_selected, 409, "fallback-cited-decision-not-selected")

        both = await gw.mint(retry_of_mint_decision_id=cited, supersedes_mint_decision_id=cited)
        conflict = _error(both, 422, "citation-conflict")
        too_long = await gw.mint(dispatch_id="d-3", ttl_s=10**8)
        _error(too_long, 400, "invalid-request")
        for refused in (conflict["mint_decision_id"], too_long.json()["error"]["mint_decision_id"]):
            view = await gw.control_get(f"/decisions/{refused}")
            assert view["outcome"] == "refused"
            assert view["account_id"] is None


async def test_concurrent_hops_citing_one_decision_one_wins(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        pool.primary_script.reply = Reply(status=503)
        first, _ = await _failed_on_primary(pool)
        await _revoke(gw, first["key_id"])
        cited = first["mint_decision_id"]
        async with _lease_watch(gw) as leases:
            answers = await asyncio.gather(
                *(gw.mint(retry_of_mint_decision_id=cited) for _ in range(8))
            )
        assert max(leases) <= 1
        await _one_winner(gw, cited, answers)


async def _one_winner(gw: Gateway, cited: str, answers: list[httpx.Response]) -> None:
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] + [409] * 7, [a.text for a in answers]
    (winner,) = [a.json() for a in answers if a.status_code == 201]
    assert winner["account_id"] == "backup"
    losers = {a.json()["error"]["code"] for a in answers if a.status_code == 409}
    assert losers <= {"fallback-cited-decision-superseded", "dispatch-lease-held"}
    view = await gw.control_get(f"/decisions/{cited}")
    assert view["successor_mint_decision_id"] == winner["mint_decision_id"]
    listed = await gw.control_get(f"/decisions?tenant={TENANT}&dispatch_id=d-1")
    assert [d["outcome"] for d in listed["decisions"]].count("selected") == 2


async def test_default_is_inert_a_hop_past_the_end_of_the_list(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        pool.primary_script.reply = Reply(status=429)
        first, _ = await _failed_on_primary(pool, model="solo")
        await _revoke(pool.gateway, first["key_id"])
        nowhere = await pool.gateway.mint(
            model="solo", retry_of_mint_decision_id=first["mint_decision_id"]
        )
        error = _error(nowhere, 503, "no-eligible-account")
        assert error.get("passed_over", []) == []
        view = await pool.gateway.control_get(f"/decisions/{error['mint_decision_id']}")
        assert (view["kind"], view["fallback_position"], view["hop"]) == ("retry", 1, 1)


async def test_lost_mint_response_is_recovered_by_idempotent_replay_and_supersede(
    make_pool: PoolFactory,
) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        url = f"{gw.url}/control/v2/keys"
        body = {"tenant": TENANT, "dispatch_id": "d-1", "model": "gpt-4o"}
        keyed = {**gw.control_headers, "Idempotency-Key": "mint-d-1-attempt-1"}
        lost = (await gw.client.post(url, json=body, headers=keyed)).json()

        replayed = await gw.client.post(url, json={**body, "ttl_s": None}, headers=keyed)
        assert replayed.status_code == 200
        assert replayed.json() == {**lost, "key": None}  # the secret is never shown twice
        reused = await gw.client.post(url, json={**body, "role": "x"}, headers=keyed)
        _error(reused, 422, "idempotency-key-reused")

        (found,) = [
            d
            for d in (await gw.control_get(f"/decisions?tenant={TENANT}&dispatch_id=d-1"))[
                "decisions"
            ]
            if d["outcome"] == "selected"
        ]
        assert found["mint_decision_id"] == lost["mint_decision_id"]
        early = await gw.mint(supersedes_mint_decision_id=found["mint_decision_id"])
        _error(early, 503, "fallback-lease-still-held")
        await _revoke(gw, found["key_id"])
        recovered = await gw.minted(supersedes_mint_decision_id=found["mint_decision_id"])
        assert (recovered["account_id"], recovered["fallback_position"], recovered["hop"]) == (
            "primary",
            0,
            0,
        )
        view = await gw.control_get(f"/decisions/{recovered['mint_decision_id']}")
        assert view["supersedes_mint_decision_id"] == lost["mint_decision_id"]

        # a key that reached the proxy proves its response was not lost
        assert (await gw.chat(recovered["key"])).status_code == 200
        await gw.evidence_for(recovered["mint_decision_id"])
        await _revoke(gw, recovered["key_id"])
        not_lost = await gw.mint(supersedes_mint_decision_id=recovered["mint_decision_id"])
        assert _error(not_lost, 409, "fallback-response-was-not-lost")["disposition"] == "rejected"

        # a refused mint replays its refusal, with the same decision
        live = await gw.minted(dispatch_id="d-2")
        keyed_2 = {**gw.control_headers, "Idempotency-Key": "mint-d-2-attempt-2"}
        body_2 = {**body, "dispatch_id": "d-2"}
        refused = await gw.client.post(url, json=body_2, headers=keyed_2)
        decision = _error(refused, 409, "dispatch-lease-held")["mint_decision_id"]
        await _revoke(gw, live["key_id"])
        again = await gw.client.post(url, json=body_2, headers=keyed_2)
        assert _error(again, 409, "dispatch-lease-held")["mint_decision_id"] == decision


async def test_renewal_uses_no_hop_and_continues_the_chain(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        first = await gw.minted()
        renewed = await gw.client.post(
            f"{gw.url}/control/v2/keys/{first['key_id']}/renew", headers=gw.control_headers
        )
        assert renewed.status_code == 201, renewed.text  # never "revoke first"
        renewal = renewed.json()
        assert (renewal["account_id"], renewal["fallback_position"], renewal["hop"]) == (
            "primary",
            0,
            0,
        )
        view = await gw.control_get(f"/decisions/{renewal['mint_decision_id']}")
        assert (view["kind"], view["renews_mint_decision_id"]) == (
            "renewal",
            first["mint_decision_id"],
        )
        assert view["retry_of_mint_decision_id"] is None

        pool.primary_script.reply = Reply(status=429)
        await gw.chat(renewal["key"])
        await gw.evidence_for(renewal["mint_decision_id"])
        await _revoke(gw, renewal["key_id"])
        # the renewed decision is continued by its renewal: a hop cites the latest one
        stale = await gw.mint(retry_of_mint_decision_id=first["mint_decision_id"])
        _error(stale, 409, "fallback-cited-decision-superseded")
        hop = await gw.minted(retry_of_mint_decision_id=renewal["mint_decision_id"])
        assert (hop["account_id"], hop["hop"]) == ("backup", 1)


async def test_concurrent_replays_of_one_idempotency_key_mint_once(make_pool: PoolFactory) -> None:
    async with make_pool() as pool:
        gw = pool.gateway
        body = {"tenant": TENANT, "dispatch_id": "d-1", "model": "gpt-4o"}
        keyed = {**gw.control_headers, "Idempotency-Key": "mint-d-1-once"}
        answers = await asyncio.gather(
            *(
                gw.client.post(f"{gw.url}/control/v2/keys", json=body, headers=keyed)
                for _ in range(6)
            )
        )
        assert sorted(a.status_code for a in answers) == [200] * 5 + [201], [
            a.text for a in answers
        ]
        views = [a.json() for a in answers]
        assert len({v["mint_decision_id"] for v in views}) == 1
        assert [v["key"] is None for v in views].count(False) == 1  # the secret, exactly once
        listed = await gw.control_get(f"/decisions?tenant={TENANT}&dispatch_id=d-1")
        assert [d["outcome"] for d in listed["decisions"]] == ["selected"]
