"""Health scenarios (a)-(e) of issue 3, through real HTTP: control plane, proxy, scripted
mock upstreams. Each runs embedded (SQLite, in-process stores) and on Postgres + Redis; the
Redis-backed ones run again with TWO proxy processes sharing the store, where every failure
is sent through one proxy and what follows through the other.

Every scenario owns its accounts and model names (prefixed with its letter), so the replicas
run hosts them all in one accounts file and starts the proxy processes once per setting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.databases import create_database, drop_database, pg_url
from tests.fixtures.deployments import (
    Deployment,
    Shape,
    deployment,
    parse_time,
)
from tests.fixtures.gateways import account_entry
from tests.fixtures.services import production_stores, require_postgres

# Threshold 1 everywhere: one failure is enough to show which scope it lands in.
LONG = {
    "LEASEGATE_FAILURE_THRESHOLD": "1",
    "LEASEGATE_ACCOUNT_FAILURE_THRESHOLD": "1",
    "LEASEGATE_BASE_COOLDOWN_S": "30",
    "LEASEGATE_MAX_COOLDOWN_S": "600",
    "LEASEGATE_COOLDOWN_JITTER": "0",  # exact windows, to measure them
}
SHORT = {**LONG, "LEASEGATE_BASE_COOLDOWN_S": "1", "LEASEGATE_MAX_COOLDOWN_S": "8"}


@dataclass(frozen=True)
class Names:
    """A scenario's own accounts and models. `big` is an alias: its served name differs."""

    p: str

    @property
    def big(self) -> str:
        return f"{self.p}-big"

    @property
    def big_served(self) -> str:
        return f"{self.p}-big-2025-01"

    @property
    def small(self) -> str:
        return f"{self.p}-small"

    def acct(self, n: int = 1) -> str:
        return f"{self.p}-acct-{n}"


Events = Callable[[], list[tuple[str, str, int]]] | None
"""(kind, subject, trips) of the health log events so far; None where the proxies run in
other processes."""


def model_of(request: MockRequest) -> object:
    return request.json.get("model") if request.json else None


def cooling(model: str) -> Callable[[dict[str, Any]], bool]:
    return lambda view: any(c["model"] == model for c in view["cooling_models"])


def healthy(view: dict[str, Any]) -> bool:
    return bool(view["health"] == "healthy")


async def cooldown_length(
    d: Deployment, key: dict[str, Any], response: httpx.Response, until: str
) -> float:
    """How long the cooldown this response tripped lasts: `until` minus when the proxy
    recorded it (arrival + duration, from the request's own evidence row)."""
    row = await d.evidence_row(key["mint_decision_id"], response.headers["x-leasegate-request-id"])
    return parse_time(until).timestamp() - ended_at(row)


def ended_at(row: dict[str, Any]) -> float:
    """When the proxy finished a request (and recorded its health), from its evidence row."""
    started: float = parse_time(row["started_at"]).timestamp()
    return started + float(row["duration_ms"]) / 1000


def assert_refused_for_health(
    refused: httpx.Response, passed_over: list[dict[str, str]], scope: str
) -> None:
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["disposition"]) == ("no-eligible-account", "held")
    assert error["passed_over"] == passed_over
    assert error["cooldown_scope"] == scope
    assert 0 < error["retry_after_s"] <= 30
    assert int(refused.headers["retry-after"]) >= 1


# -- (a) one account, two models: model A cools, model B carries on ------------------------


def one_account_two_models(n: Names, ups: list[MockUpstream]) -> list[dict[str, Any]]:
    return [account_entry(n.acct(), ups[0], {n.big: n.big_served, n.small: n.small})]


async def model_cools_while_another_carries_on(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    stream_error = n.p.endswith("stream-error")  # else a 503
    failure = Reply(error_after=2) if stream_error else Reply(status=503)
    ups[0].script = lambda r: failure if model_of(r) == n.big_served else None
    key_a = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")
    spare_a = await d.minted(model=n.big, dispatch_id=f"{n.p}-2")  # minted before the trip
    assert (key_a["account_id"], key_a["served_model"]) == (n.acct(), n.big_served)

    if stream_error:
        failed = await d.via(0).chat(key_a, stream=True)
        assert failed.status_code == 200  # the refusal is an event inside a 200 stream
        assert b'"error"' in failed.content
    else:
        failed = await succeed_across_the_trip(d, n, ups[0], failure, key_a)
        assert failed.status_code == 503
    assert model_of(ups[0].requests[-1]) == n.big_served  # the alias was rewritten
    view = await d.account_when(n.acct(), cooling(n.big_served))
    (entry,) = view["cooling_models"]
    reason = "http-502" if stream_error else "http-503"  # OpenRouter's in-stream code 502
    assert (entry["model"], entry["reason"], entry["trips"]) == (n.big_served, reason, 1)
    assert (view["health"], view["circuit"]["open"]) == ("cooling", False)
    row = await d.evidence_row(key_a["mint_decision_id"], failed.headers["x-leasegate-request-id"])
    outcome = "in-stream-error" if stream_error else "upstream-error"
    assert (row["outcome"], row["scope"], row["qualifying"]) == (outcome, "model", True)
    assert (row["requested_model"], row["served_model"]) == (n.big, n.big_served)

    # model B: still minted on the same account, and served by the other proxy
    key_b = await d.minted(model=n.small, dispatch_id=f"{n.p}-3")
    assert (key_b["account_id"], key_b["passed_over"]) == (n.acct(), [])
    served = await d.via(1).chat(key_b)
    assert served.status_code == 200, served.text
    assert served.headers["x-leasegate-account"] == n.acct()

    # model A: refused at mint, with the scope named, and at the proxy before any upstream call
    refused = await d.mint(model=n.big, dispatch_id=f"{n.p}-4")
    assert_refused_for_health(refused, [{"account_id": n.acct(), "code": "model-cooling"}], "model")
    calls = ups[0].count
    blocked = await d.via(1).chat(spare_a)
    assert blocked.status_code == 503
    assert blocked.json()["error"]["code"] == "model-cooling"
    assert 1 <= int(blocked.headers["retry-after"]) <= 30
    assert ups[0].count == calls

    for url in d.services:
        text = await d.metrics(url)
        assert f'leasegate_model_cooling{{account="{n.acct()}",model="{n.big_served}"}} 1.0' in text
        assert f'leasegate_model_cooling{{account="{n.acct()}",model="{n.small}"}} 0.0' in text
    failures = f'leasegate_upstream_failures_total{{account="{n.acct()}",model="{n.big_served}"'
    assert f'{failures},scope="model"}} 1.0' in await d.metrics(d.proxies[0])
    if events is not None:
        assert events() == [("cooldown-started", f"{n.acct()}/{n.big_served}", 1)]


async def succeed_across_the_trip(
    d: Deployment, n: Names, upstream: MockUpstream, failure: Reply, key: dict[str, Any]
) -> httpx.Response:
    """Fail `key`'s request while another request for the same model, admitted before the
    trip, is still streaming; it then succeeds, and must leave the cooldown in place."""
    slow = Reply(chunk_delays=[0, 1.5])  # the margin for the trip to be recorded first
    upstream.script = lambda r: (
        (slow if r.stream else failure) if model_of(r) == n.big_served else None
    )
    early = await d.minted(model=n.big, dispatch_id=f"{n.p}-5")
    async with d.via(1).open_chat(early) as streaming:
        chunks = streaming.aiter_raw()
        await anext(chunks)  # admitted and streaming: the health check is behind it
        failed = await d.via(0).chat(key)
        await d.account_when(n.acct(), cooling(n.big_served))
        rest = b"".join([chunk async for chunk in chunks])
    assert (streaming.status_code, rest.rstrip().endswith(b"[DONE]")) == (200, True)
    done = await d.evidence_row(
        early["mint_decision_id"], streaming.headers["x-leasegate-request-id"]
    )
    tripped = await d.evidence_row(
        key["mint_decision_id"], failed.headers["x-leasegate-request-id"]
    )
    assert done["outcome"] == "success"
    assert ended_at(done) > ended_at(tripped), "the success must land during the cooldown"
    view = await d.control_get(f"/accounts/{n.acct()}")
    assert [(c["model"], c["trips"]) for c in view["cooling_models"]] == [(n.big_served, 1)]
    return failed


# -- (b) a 401 opens the account circuit for every model at once ---------------------------


async def circuit_opens_for_every_model(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    ups[0].script = lambda r: Reply(status=401) if model_of(r) == n.big_served else None
    key_big = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")
    key_small = await d.minted(model=n.small, dispatch_id=f"{n.p}-2")
    assert (await d.via(0).chat(key_big)).status_code == 401

    view = await d.account_when(n.acct(), lambda v: v["health"] == "circuit-open")
    assert view["circuit"]["open"] is True
    # the provider's own code in its JSON (the example body's), not the bare status
    assert view["circuit"]["reason"] == "invalid_api_key"
    assert parse_time(view["circuit"]["until"])
    assert view["cooling_models"] == [], "an account fault cools no single model"

    calls = ups[0].count
    blocked = await d.via(1).chat(key_small)  # the model that never failed
    assert blocked.status_code == 503
    assert blocked.json()["error"]["code"] == "circuit-open"
    assert ups[0].count == calls
    for model, dispatch in ((n.big, f"{n.p}-3"), (n.small, f"{n.p}-4")):
        refused = await d.mint(model=model, dispatch_id=dispatch)
        assert_refused_for_health(
            refused, [{"account_id": n.acct(), "code": "circuit-open"}], "account"
        )
    row = await d.evidence_row(
        key_small["mint_decision_id"], blocked.headers["x-leasegate-request-id"]
    )
    assert (row["outcome"], row["refusal_reason"], row["qualifying"]) == (
        "refused",
        "circuit-open",
        True,
    )
    for url in d.services:
        assert f'leasegate_account_circuit_open{{account="{n.acct()}"}} 1.0' in await d.metrics(url)
    if events is not None:
        assert events() == [("circuit-opened", n.acct(), 1)]


# -- (c) a two-account pool: while account 1 cools for A, a fresh mint lands on account 2 --


def two_accounts(n: Names, ups: list[MockUpstream]) -> list[dict[str, Any]]:
    return [account_entry(n.acct(i + 1), ups[i], {n.big: n.big_served}) for i in range(2)]


async def pool_skips_the_cooling_account(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    ups[0].script = lambda _: Reply(status=503)
    first = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")
    assert (first["account_id"], first["fallback_position"]) == (n.acct(1), 0)
    assert (await d.via(0).chat(first)).status_code == 503
    await d.account_when(n.acct(1), cooling(n.big_served))

    fresh = await d.minted(model=n.big, dispatch_id=f"{n.p}-2")
    assert (fresh["account_id"], fresh["fallback_position"], fresh["hop"]) == (n.acct(2), 1, 0)
    assert fresh["passed_over"] == [{"account_id": n.acct(1), "code": "model-cooling"}]
    served = await d.via(1).chat(fresh)
    assert served.status_code == 200, served.text
    assert served.headers["x-leasegate-account"] == n.acct(2)
    assert (ups[0].count, ups[1].count) == (1, 1)
    assert healthy(await d.control_get(f"/accounts/{n.acct(2)}"))


# -- (d) after expiry: the one trial fails and re-trips for another base window; a success
# resets the trips -----------------------------------------------------------------------


def one_account_short_windows(n: Names, ups: list[MockUpstream]) -> list[dict[str, Any]]:
    return [account_entry(n.acct(), ups[0], {n.big: n.big_served})]


async def one_trial_after_expiry(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    failing = Reply(status=503)
    replies: list[Reply | None] = [failing]
    ups[0].script = lambda _: replies[0]
    key = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")

    async def trip(via: int, trips: int, seconds: float) -> None:
        calls = ups[0].count
        failed = await d.via(via).chat(key)
        assert failed.status_code == 503, failed.text
        assert ups[0].count == calls + 1, "the upstream's 503, not a gateway refusal"
        view = await d.account_when(n.acct(), cooling(n.big_served))
        (entry,) = view["cooling_models"]
        assert entry["trips"] == trips
        length = await cooldown_length(d, key, failed, entry["until"])
        assert seconds - 0.05 <= length <= seconds + 0.25
        await d.account_when(n.acct(), healthy)  # ends by time alone

    await trip(via=0, trips=1, seconds=1)  # BASE
    await trip(via=1, trips=2, seconds=1)  # half-open: the trial fails, one more window
    replies[0] = None
    assert (await d.via(0).chat(key)).status_code == 200  # after expiry: the trips reset
    replies[0] = failing
    await trip(via=1, trips=1, seconds=1)  # so the next trip starts at BASE again
    if events is not None:
        subject = f"{n.acct()}/{n.big_served}"
        assert events() == [
            ("cooldown-started", subject, 1),
            ("cooldown-started", subject, 2),
            ("cooldown-ended", subject, 2),
            ("cooldown-started", subject, 1),
        ]


# -- (e) Retry-After longer than the backoff wins, capped by MAX ---------------------------


async def retry_after_beats_the_backoff(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    replies = {
        # a fault's Retry-After (a rate-limit 429 does not cool at all: test_quota_e2e.py)
        n.big_served: Reply(status=503, headers={"retry-after": "100"}),
        n.small: Reply(status=503, headers={"retry-after": "3600"}),
    }
    ups[0].script = lambda r: replies.get(str(model_of(r)))
    key_big = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")
    key_small = await d.minted(model=n.small, dispatch_id=f"{n.p}-2")
    big_failed = await d.via(0).chat(key_big)
    small_failed = await d.via(1).chat(key_small)
    assert (big_failed.status_code, small_failed.status_code) == (503, 503)

    view = await d.account_when(n.acct(), lambda v: len(v["cooling_models"]) == 2)
    until = {c["model"]: c["until"] for c in view["cooling_models"]}
    big = await cooldown_length(d, key_big, big_failed, until[n.big_served])
    small = await cooldown_length(d, key_small, small_failed, until[n.small])
    assert 100 - 0.05 <= big <= 100.25, "Retry-After 100 beats the 30 s backoff"
    assert 600 - 0.05 <= small <= 600.25, "Retry-After 3600 is capped at MAX 600"
    refused = await d.mint(model=n.big, dispatch_id=f"{n.p}-3")
    assert refused.status_code == 503
    assert 90 < refused.json()["error"]["retry_after_s"] <= 100


# -- (f) a rate limit heard by one proxy holds the pair on every proxy, and cools nothing --


async def rate_limit_holds_the_pair_on_every_proxy(
    d: Deployment, n: Names, ups: list[MockUpstream], events: Events
) -> None:
    limited = [
        Reply.json_error(
            429,
            {"error": {"type": "tokens", "code": "rate_limit_exceeded", "message": "slow"}},
            {"retry-after": "30"},
        )
    ]
    ups[0].script = lambda r: limited.pop() if limited and model_of(r) == n.big_served else None
    key = await d.minted(model=n.big, dispatch_id=f"{n.p}-1")
    assert (await d.via(0).chat(key)).status_code == 429
    # the other proxy hears of it through the shared store (one flush, one refresh: ~1.25 s);
    # until then the upstream, which has forgotten, still answers it
    for _ in range(60):
        answer = await d.via(1).chat(key)
        if answer.status_code == 429:
            break
        await asyncio.sleep(0.05)
    assert answer.json()["error"]["code"] == "account-quota-exhausted"
    assert 25 <= int(answer.headers["retry-after"]) <= 31
    calls = ups[0].count
    assert (await d.via(1).chat(key)).status_code == 429
    assert (await d.via(0).chat(key)).status_code == 429
    assert ups[0].count == calls, "held on both proxies: the provider is not asked"
    view = await d.account_when(n.acct(), lambda v: bool(v["quota"]))
    assert view["cooling_models"] == []
    assert not view["circuit"]["open"]
    other = await d.minted(model=n.small, dispatch_id=f"{n.p}-2")
    assert (await d.via(1).chat(other)).status_code == 200  # its other model is not held


Scenario = Callable[[Deployment, Names, list[MockUpstream], Events], Awaitable[None]]
Accounts = Callable[[Names, list[MockUpstream]], list[dict[str, Any]]]

# name -> (run, accounts, upstreams, settings)
SCENARIOS: dict[str, tuple[Scenario, Accounts, int, dict[str, str]]] = {
    "model-cools-on-503": (model_cools_while_another_carries_on, one_account_two_models, 1, LONG),
    "model-cools-on-stream-error": (
        model_cools_while_another_carries_on,
        one_account_two_models,
        1,
        LONG,
    ),
    "circuit-opens-on-401": (circuit_opens_for_every_model, one_account_two_models, 1, LONG),
    "pool-skips-cooling-account": (pool_skips_the_cooling_account, two_accounts, 2, LONG),
    "trial-after-expiry": (one_trial_after_expiry, one_account_short_windows, 1, SHORT),
    "retry-after-beats-backoff": (retry_after_beats_the_backoff, one_account_two_models, 1, LONG),
    "rate-limit-holds-every-proxy": (
        rate_limit_holds_the_pair_on_every_proxy,
        one_account_two_models,
        1,
        LONG,
    ),
}


@pytest.fixture(scope="module")
def module_database() -> Iterator[str]:
    """One migrated Postgres database for this module's Redis-backed runs: a deployment mints
    under a tenant of its own, and each scenario owns its accounts and models."""
    require_postgres()
    name = asyncio.run(create_database(migrated=True))
    try:
        yield pg_url(name)
    finally:
        asyncio.run(drop_database(name))


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def shape(request: pytest.FixtureRequest) -> tuple[Shape, str | None]:
    """The shape, and for Redis the module's database (set up here, outside the test's loop:
    the database fixture runs its own)."""
    if request.param == "embedded":
        return "embedded", None
    url: str = request.getfixturevalue("module_database")
    return "redis", url


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_health_scenario(
    name: str,
    shape: tuple[Shape, str | None],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="leasegate.health")

    def events() -> list[tuple[str, str, int]]:
        return [
            (r.getMessage(), r.__dict__["subject"], r.__dict__["trips"])
            for r in caplog.records
            if r.name == "leasegate.health" and "subject" in r.__dict__
        ]

    run, accounts, count, settings = SCENARIOS[name]
    names = Names(name)
    kind, database_url = shape
    async with AsyncExitStack() as stack:
        ups = [await stack.enter_async_context(MockUpstream()) for _ in range(count)]
        stores = None
        if database_url is not None:
            stores = await stack.enter_async_context(production_stores(database_url))
        async with deployment(kind, tmp_path, accounts(names, ups), settings, stores=stores) as d:
            await run(d, names, ups, events)


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.redis
@pytest.mark.parametrize("settings", [LONG, SHORT], ids=["long", "short"])
async def test_health_scenarios_across_two_proxy_processes(
    settings: dict[str, str], tmp_path: Path, module_database: str
) -> None:
    """Every scenario of these settings against one control plane and two proxy processes
    (started once: each costs seconds), one accounts file holding all their accounts."""
    chosen = [name for name, spec in SCENARIOS.items() if spec[3] is settings]
    async with AsyncExitStack() as stack:
        ups = {
            name: [await stack.enter_async_context(MockUpstream()) for _ in range(spec[2])]
            for name, spec in SCENARIOS.items()
            if name in chosen
        }
        accounts = [a for name in chosen for a in SCENARIOS[name][1](Names(name), ups[name])]
        stores = await stack.enter_async_context(production_stores(module_database))
        async with deployment("replicas", tmp_path, accounts, settings, stores=stores) as d:
            for name in chosen:
                await SCENARIOS[name][0](d, Names(name), ups[name], None)
