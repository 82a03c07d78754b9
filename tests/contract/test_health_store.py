"""One contract, two health stores: whatever holds for the in-process one holds for Redis."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import RedisCluster

from leasegate.core.observation import Classification
from leasegate.core.ports.health import (
    Admitted,
    Cooldown,
    HealthPolicy,
    HealthStore,
    HealthTransition,
)
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.kv.health_redis import RedisHealthStore
from leasegate.kv.keys import circuit_key, pair_key
from leasegate.kv.slots_redis import RedisRequestSlots
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

T0 = 1_700_000_000.0
POLICY = HealthPolicy(
    failure_threshold=3, account_failure_threshold=2, base_cooldown_s=30, max_cooldown_s=600
)

OK = Classification("success", None, False, None, resets_streak=True)
OVERLOADED = Classification("upstream-error", "model", True, "http-503")
RATE_LIMITED = Classification("upstream-error", "model", True, "http-429")
BAD_KEY = Classification("upstream-error", "account", True, "invalid_api_key")
CALLERS_FAULT = Classification("upstream-error", None, False, "http-400")
ABORTED = Classification("client-abort", None, False, "client-abort")
REFUSED = Classification("refused", None, True, "model-cooling")


REDIS_KINDS = [
    pytest.param("redis_url", id="redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster_url", id="redis-cluster", marks=pytest.mark.redis),
]


@pytest.fixture(params=REDIS_KINDS)
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """A single Redis, then a three-master cluster."""
    url: str = request.getfixturevalue(request.param)
    return url


@pytest.fixture(params=["in-process", *REDIS_KINDS])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[HealthStore]:
    if request.param == "in-process":
        memory = InProcessHealthStore(POLICY)
        yield memory
        await memory.aclose()
        return
    # redis_prefix is an async fixture, which getfixturevalue cannot set up from here
    client = connect(request.getfixturevalue(request.param))
    prefix = f"lgtest:{secrets.token_hex(4)}"
    shared = RedisHealthStore(client, prefix, POLICY)
    try:
        yield shared
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


async def fail(
    store: HealthStore,
    times: int,
    now: float,
    *,
    model: str = "gpt-4o",
    account: str = "acct",
    kind: Classification = OVERLOADED,
    retry_after_s: float | None = None,
) -> list[HealthTransition]:
    transitions: list[HealthTransition] = []
    for _ in range(times):
        transitions += await store.record(account, model, kind, retry_after_s, now)
    return transitions


async def cooling_until(store: HealthStore, now: float, model: str = "gpt-4o") -> float | None:
    found = (await store.snapshot([("acct", model)], now)).cooling_for("acct", model)
    return None if found is None else found.until


async def test_the_threshold_th_consecutive_failure_starts_a_cooldown(store: HealthStore) -> None:
    assert await fail(store, 2, T0) == []
    assert await cooling_until(store, T0) is None
    started = await fail(store, 1, T0 + 1)
    assert started == [
        HealthTransition("cooldown-started", "acct", "gpt-4o", "http-503", T0 + 31, 1)
    ]
    snapshot = await store.snapshot([("acct", "gpt-4o")], T0 + 2)
    cooldown = snapshot.cooling_for("acct", "gpt-4o")
    assert cooldown is not None
    assert (cooldown.until, cooldown.reason, cooldown.trips) == (T0 + 31, "http-503", 1)
    assert snapshot.circuit("acct") is None


async def test_every_window_is_one_base_cooldown_long(store: HealthStore) -> None:
    await fail(store, 3, T0)
    now, lengths = T0, []
    for _ in range(7):
        until = await cooling_until(store, now)
        assert until is not None
        lengths.append(until - now)
        now = until  # expired: half-open, and the next failure re-trips at once
        assert await cooling_until(store, now) is None
        (started,) = await fail(store, 1, now)
        assert started.kind == "cooldown-started"
    assert lengths == [30] * 7  # no growth: a recovery is seen within one base window


async def test_retry_after_wins_over_the_backoff_but_is_capped(store: HealthStore) -> None:
    await fail(store, 3, T0, model="a", retry_after_s=100)
    await fail(store, 3, T0, model="b", retry_after_s=86_400)
    await fail(store, 3, T0, model="c", retry_after_s=5)
    assert await cooling_until(store, T0, "a") == T0 + 100
    assert await cooling_until(store, T0, "b") == T0 + 600
    assert await cooling_until(store, T0, "c") == T0 + 30


async def test_a_success_resets_the_streak(store: HealthStore) -> None:
    await fail(store, 2, T0)
    assert await store.record("acct", "gpt-4o", OK, None, T0 + 1) == []
    await fail(store, 2, T0 + 2)
    assert await cooling_until(store, T0 + 2) is None
    await fail(store, 1, T0 + 3)
    assert await cooling_until(store, T0 + 3) == T0 + 33


async def test_failures_during_a_cooldown_never_extend_it(store: HealthStore) -> None:
    await fail(store, 3, T0)
    assert await fail(store, 10, T0 + 29, retry_after_s=500) == []
    assert await cooling_until(store, T0 + 29) == T0 + 30


async def test_half_open_the_first_failure_after_expiry_re_trips(store: HealthStore) -> None:
    await fail(store, 3, T0)
    assert await fail(store, 1, T0 + 45, kind=RATE_LIMITED) == [
        HealthTransition("cooldown-started", "acct", "gpt-4o", "http-429", T0 + 75, 2)
    ]


async def test_a_success_ends_the_cooldown_and_restarts_the_backoff(store: HealthStore) -> None:
    await fail(store, 3, T0)
    await fail(store, 1, T0 + 30)  # trips=2
    ended = await store.record("acct", "gpt-4o", OK, None, T0 + 100)
    assert ended == [HealthTransition("cooldown-ended", "acct", "gpt-4o", "http-503", None, 2)]
    assert await cooling_until(store, T0 + 100) is None
    await fail(store, 2, T0 + 101)
    assert await cooling_until(store, T0 + 101) is None, "the streak restarted at zero"
    (started,) = await fail(store, 1, T0 + 102)
    assert (started.until, started.trips) == (T0 + 132, 1)


async def test_one_models_cooldown_leaves_its_other_models_healthy(store: HealthStore) -> None:
    await fail(store, 3, T0, model="gpt-4o")
    await fail(store, 2, T0, model="gpt-4o-mini")
    snapshot = await store.snapshot([("acct", "gpt-4o"), ("acct", "gpt-4o-mini")], T0 + 1)
    assert snapshot.cooling_for("acct", "gpt-4o") is not None
    assert snapshot.cooling_for("acct", "gpt-4o-mini") is None
    assert snapshot.circuit("acct") is None
    # a success on the other model leaves the cooling one cooling
    assert await store.record("acct", "gpt-4o-mini", OK, None, T0 + 2) == []
    assert await cooling_until(store, T0 + 2, "gpt-4o") == T0 + 30


async def test_the_account_circuit_has_its_own_threshold(store: HealthStore) -> None:
    await fail(store, 5, T0, model="m1")  # model scope: cools m1, never the circuit
    assert await fail(store, 1, T0, kind=BAD_KEY) == []
    opened = await fail(store, 1, T0 + 1, kind=BAD_KEY, model="m2")
    assert opened == [
        HealthTransition("circuit-opened", "acct", None, "invalid_api_key", T0 + 31, 1)
    ]
    snapshot = await store.snapshot([("acct", "m1"), ("acct", "m2"), ("acct", "m3")], T0 + 2)
    circuit = snapshot.circuit("acct")
    assert circuit is not None
    assert (circuit.model, circuit.until, circuit.trips) == (None, T0 + 31, 1)
    assert snapshot.cooling_for("acct", "m2") is None, "account scope does not cool a model"
    # half-open circuit re-trips at once
    assert (await fail(store, 1, T0 + 31, kind=BAD_KEY))[0].until == T0 + 61


async def test_a_success_during_a_cooldown_leaves_it_and_its_trips(store: HealthStore) -> None:
    await fail(store, 3, T0)
    # a request admitted before the trip finishes well: it proves nothing about the upstream now
    assert await store.record("acct", "gpt-4o", OK, None, T0 + 5) == []
    assert await cooling_until(store, T0 + 5) == T0 + 30
    cooldown = (await store.snapshot([("acct", "gpt-4o")], T0 + 5)).cooling_for("acct", "gpt-4o")
    assert cooldown is not None
    assert cooldown.trips == 1
    # the trips survived: the first failure after expiry trips again at once
    (started,) = await fail(store, 1, T0 + 30)
    assert (started.until, started.trips) == (T0 + 60, 2)


async def test_a_success_on_any_model_closes_the_circuit_once_expired(store: HealthStore) -> None:
    await fail(store, 2, T0, kind=BAD_KEY, model="m1")
    assert await store.record("acct", "m2", OK, None, T0 + 5) == [], "still open: it stays"
    circuit = (await store.snapshot([("acct", "m1")], T0 + 5)).circuit("acct")
    assert circuit is not None
    assert (circuit.until, circuit.trips) == (T0 + 30, 1)
    closed = await store.record("acct", "m2", OK, None, T0 + 30)
    assert closed == [HealthTransition("circuit-closed", "acct", None, "invalid_api_key", None, 1)]
    assert (await store.snapshot([("acct", "m1")], T0 + 30)).circuit("acct") is None
    # and its streak restarted
    assert await fail(store, 1, T0 + 31, kind=BAD_KEY) == []


async def test_a_cooldown_expires_by_time_alone(store: HealthStore) -> None:
    await fail(store, 3, T0)
    await fail(store, 2, T0, kind=BAD_KEY)
    pairs = [("acct", "gpt-4o")]
    before = await store.snapshot(pairs, T0 + 29.999)
    assert before.cooling_for("acct", "gpt-4o") is not None
    assert before.circuit("acct") is not None
    after = await store.snapshot(pairs, T0 + 30)
    assert after.cooling == {}
    assert after.circuits == {}


async def test_unscoped_outcomes_change_nothing(store: HealthStore) -> None:
    await fail(store, 2, T0)
    for kind in (CALLERS_FAULT, ABORTED, REFUSED):
        assert await store.record("acct", "gpt-4o", kind, None, T0 + 1) == []
    assert await cooling_until(store, T0 + 1) is None
    await fail(store, 1, T0 + 2)
    assert await cooling_until(store, T0 + 2) == T0 + 32, "the streak was not broken"


async def test_a_snapshot_covers_many_accounts_and_models(store: HealthStore) -> None:
    await fail(store, 3, T0, account="a", model="x")
    await fail(store, 2, T0, account="b", kind=BAD_KEY)
    await fail(store, 3, T0, account="c", model="llama3:8b")
    pairs = [("a", "x"), ("a", "y"), ("b", "x"), ("c", "llama3:8b"), ("c", "x"), ("d", "x")]
    snapshot = await store.snapshot(pairs, T0 + 1)
    assert set(snapshot.cooling) == {("a", "x"), ("c", "llama3:8b")}
    assert set(snapshot.circuits) == {"b"}
    assert [c.model for c in snapshot.cooling_models("c")] == ["llama3:8b"]
    assert (await store.snapshot([], T0)).cooling == {}


# -- admission: one trial per window --------------------------------------------------------


async def test_admission_refuses_while_active_circuit_first(store: HealthStore) -> None:
    assert await store.admit("acct", "gpt-4o", T0) == Admitted()
    await fail(store, 3, T0)
    assert await store.admit("acct", "gpt-4o", T0 + 1) == Cooldown(
        "acct", "gpt-4o", T0 + 30, "http-503", 1
    )
    assert await store.admit("acct", "other", T0 + 1) == Admitted()  # per served model
    await fail(store, 2, T0 + 2, kind=BAD_KEY)
    assert await store.admit("acct", "gpt-4o", T0 + 3) == Cooldown(
        "acct", None, T0 + 32, "invalid_api_key", 1
    )


async def test_half_open_admits_one_trial_per_window(store: HealthStore) -> None:
    await fail(store, 3, T0)
    assert await store.admit("acct", "gpt-4o", T0 + 30) == Admitted(trial_pair=True)
    # every other request is refused until the trial reports or its window ends
    blocked = await store.admit("acct", "gpt-4o", T0 + 31)
    assert blocked == Cooldown("acct", "gpt-4o", T0 + 60, "http-503", 1)
    assert await cooling_until(store, T0 + 31) == T0 + 60  # mints pass over it meanwhile
    # a trial that never reports frees the slot when its window ends
    assert await store.admit("acct", "gpt-4o", T0 + 60) == Admitted(trial_pair=True)


async def test_the_trials_success_recovers_at_once(store: HealthStore) -> None:
    await fail(store, 3, T0)
    trial = await store.admit("acct", "gpt-4o", T0 + 30)
    assert isinstance(trial, Admitted)
    # a request admitted before the trip succeeding now proves nothing: still closed
    assert await store.record("acct", "gpt-4o", OK, None, T0 + 31) == []
    assert await cooling_until(store, T0 + 31) == T0 + 60
    ended = await store.record("acct", "gpt-4o", OK, None, T0 + 32, trial=trial)
    assert ended == [HealthTransition("cooldown-ended", "acct", "gpt-4o", "http-503", None, 1)]
    assert await store.admit("acct", "gpt-4o", T0 + 33) == Admitted()


async def test_the_trials_failure_closes_it_for_another_window(store: HealthStore) -> None:
    await fail(store, 3, T0)
    trial = await store.admit("acct", "gpt-4o", T0 + 30)
    assert isinstance(trial, Admitted)
    # other failures during the trial's window change nothing; the trial's own does
    assert await fail(store, 1, T0 + 31) == []
    started = await store.record("acct", "gpt-4o", OVERLOADED, None, T0 + 35, trial=trial)
    assert started == [
        HealthTransition("cooldown-started", "acct", "gpt-4o", "http-503", T0 + 65, 2)
    ]
    assert isinstance(await store.admit("acct", "gpt-4o", T0 + 64), Cooldown)
    assert await store.admit("acct", "gpt-4o", T0 + 65) == Admitted(trial_pair=True)


async def test_a_half_open_circuit_admits_one_trial_too(store: HealthStore) -> None:
    await fail(store, 2, T0, kind=BAD_KEY)
    trial = await store.admit("acct", "m1", T0 + 30)
    assert trial == Admitted(trial_circuit=True)
    assert isinstance(await store.admit("acct", "m2", T0 + 31), Cooldown)
    closed = await store.record("acct", "m1", OK, None, T0 + 32, trial=trial)
    assert [t.kind for t in closed] == ["circuit-closed"]


async def test_concurrent_admissions_claim_one_trial(store: HealthStore) -> None:
    await fail(store, 3, T0)
    verdicts = await asyncio.gather(*(store.admit("acct", "gpt-4o", T0 + 30) for _ in range(20)))
    assert sum(isinstance(v, Admitted) for v in verdicts) == 1


async def test_jitter_shortens_windows_within_its_fraction(store: HealthStore) -> None:
    del store  # the jitter is the store's own draw: build both with a known source
    policy = HealthPolicy(failure_threshold=1, base_cooldown_s=30, jitter=0.2)
    memory = InProcessHealthStore(policy, rng=lambda: 0.5)
    (started,) = await memory.record("acct", "m", OVERLOADED, None, T0)
    assert started.until == T0 + 27  # 30 x (1 - 0.2 x 0.5)
    (started,) = await memory.record("other", "m", OVERLOADED, 100.0, T0)
    assert started.until == T0 + 100  # an upstream's longer hint still wins


# -- Redis only ---------------------------------------------------------------------------


class CountingConnection(aioredis.Connection):
    """Counts writes to the server: a pipeline is one write, so one per round trip."""

    writes: int = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.writes += 1
        await super().send_packed_command(command, check_health)


@pytest.mark.redis
async def test_every_redis_key_carries_a_ttl(any_redis_url: str) -> None:
    client = connect(any_redis_url)
    prefix = f"lgtest:{secrets.token_hex(4)}"
    store = RedisHealthStore(client, prefix, POLICY)
    try:
        await fail(store, 1, T0, model="streak-only")
        await fail(store, 3, T0, model="cooling", retry_after_s=100)
        await fail(store, 2, T0, kind=BAD_KEY)
        pattern = f"{prefix}:*"
        keys = sorted([k.decode() async for k in client.scan_iter(match=pattern)])
        assert keys == [
            circuit_key(prefix, "acct"),
            pair_key(prefix, "acct", "cooling"),
            pair_key(prefix, "acct", "streak-only"),
        ]
        # max(until - now, 0) + retention, refreshed on every write
        retention_ms = POLICY.retention_s * 1000
        ttls = {k.rsplit(":", 1)[-1]: await client.pttl(k) for k in keys}
        assert retention_ms - 5_000 < ttls["streak-only"] <= retention_ms
        assert retention_ms + 95_000 < ttls["cooling"] <= retention_ms + 100_000
        assert retention_ms + 25_000 < ttls["c"] <= retention_ms + 30_000
        # a success after expiry deletes rather than leaving healthy entries behind
        await store.record("acct", "cooling", OK, None, T0 + 100)
        assert [k async for k in client.scan_iter(match=pattern)] == [
            pair_key(prefix, "acct", "streak-only").encode()
        ]
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


@pytest.mark.redis
async def test_a_redis_snapshot_is_one_round_trip(redis_url: str, redis_prefix: str) -> None:
    client = aioredis.from_url(redis_url, connection_class=CountingConnection)
    store = RedisHealthStore(client, redis_prefix, POLICY, owns_client=True)
    try:
        for account in ("a", "b", "c"):
            await fail(store, 3, T0, account=account, model="m")
        pairs = [(account, model) for account in "abcdefgh" for model in ("m", "n", "o")]
        CountingConnection.writes = 0
        snapshot = await store.snapshot(pairs, T0)
        assert CountingConnection.writes == 1
        assert set(snapshot.cooling) == {("a", "m"), ("b", "m"), ("c", "m")}
    finally:
        await store.aclose()


@pytest.mark.redis
async def test_one_accounts_keys_share_a_cluster_slot_and_accounts_spread(
    redis_cluster_url: str,
) -> None:
    client = connect(redis_cluster_url)
    assert isinstance(client, RedisCluster)
    await client.initialize()  # learns the slot map
    store = RedisHealthStore(client, "lgtest", POLICY)
    try:
        accounts = [f"acct-{i}" for i in range(30)]
        for account in accounts:
            names = [store.circuit_key(account), store.pair_key(account, "gpt-4o:mini")]
            names.append(RedisRequestSlots(client, "lgtest", 1.0).key(account))
            assert len({client.keyslot(name) for name in names}) == 1, account
        owners = {client.get_node_from_key(store.circuit_key(a)) for a in accounts}
        assert len(owners) == 3, "accounts spread over every master"
    finally:
        await client.aclose()


async def test_the_in_process_store_forgets_idle_entries() -> None:
    store = InProcessHealthStore(POLICY)
    step = POLICY.retention_s / 800  # about 800 entries are live at any time
    for index in range(5_000):
        await store.record(f"acct-{index}", "m", OVERLOADED, None, T0 + index * step)
    assert len(store) <= 2 * 800 + 1, "stale streaks were pruned as the table grew"
    now = T0 + 5_000 * step
    assert store.state_of("acct-0", "m", now).streak == 0, "forgotten after retention"
    assert store.state_of("acct-4999", "m", now).streak == 1


# -- the Lua mirrors the pure machine -------------------------------------------------------

_OUTCOMES = st.sampled_from([OK, OVERLOADED, RATE_LIMITED, BAD_KEY, CALLERS_FAULT])
Step = tuple[Classification, str, float, float | None, bool]
_STEPS = st.lists(
    st.tuples(
        _OUTCOMES,
        st.sampled_from(["m1", "m2"]),
        st.floats(0, 900, allow_nan=False),  # seconds since the previous step
        st.none() | st.floats(0, 2_000, allow_nan=False),  # Retry-After
        st.booleans(),  # admitted first (a trial when half-open), or one admitted long ago
    ),
    max_size=40,
)


async def _run_both(url: str, steps: list[Step]) -> None:
    policy = HealthPolicy(
        failure_threshold=2,
        account_failure_threshold=2,
        base_cooldown_s=7.3,
        max_cooldown_s=250,
        jitter=0.3,
    )
    memory = InProcessHealthStore(policy, rng=lambda: 0.37)
    client = connect(url)
    prefix = f"lgtest:{secrets.token_hex(4)}"
    shared = RedisHealthStore(client, prefix, policy, rng=lambda: 0.37)
    pairs = [("acct", "m1"), ("acct", "m2")]
    now = T0
    try:
        for kind, model, elapsed, retry_after, admitted_now in steps:
            now += elapsed
            trial = None
            if admitted_now:
                admission = await memory.admit("acct", model, now)
                assert await shared.admit("acct", model, now) == admission
                if isinstance(admission, Cooldown):
                    continue
                trial = admission
            expected = await memory.record("acct", model, kind, retry_after, now, trial=trial)
            got = await shared.record("acct", model, kind, retry_after, now, trial=trial)
            assert got == expected
            assert await shared.snapshot(pairs, now) == await memory.snapshot(pairs, now)
            # the raw machine too (streaks are invisible in a snapshot), pair and circuit
            for raw_model in (model, None):
                assert await shared.state_of("acct", raw_model, now) == memory.state_of(
                    "acct", raw_model, now
                )
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


@pytest.mark.redis
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # redis_url is a constant
)
@given(steps=_STEPS)
def test_redis_and_in_process_agree_on_any_history(any_redis_url: str, steps: list[Step]) -> None:
    asyncio.run(_run_both(any_redis_url, steps))
