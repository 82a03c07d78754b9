"""Two proxies' quota views over one shared store (the in-process twin), on a clock the test
moves: what one learns reaches the other by the batched write and the periodic read, a newer
statement wins, and nothing on the request path touches the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leasegate.accounts import parse_accounts
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.kv.quota_memory import InProcessQuotaStore
from leasegate.providers import Usage
from leasegate.proxy.quota_view import QuotaView
from leasegate.routing.quota import Estimate
from tests.fixtures.control import StepClock

REGISTRY = parse_accounts(
    {
        "accounts": [
            {
                "id": "a",
                "provider": "openai",
                "base_url": "https://api.example",
                "credential_env": "LEASEGATE_CRED_A",
                "models": {"m": "m", "local": {"served": "local", "rpm": 1, "output_estimate": 7}},
            }
        ]
    },
    {"LEASEGATE_CRED_A"},
)
COST = Estimate(10, 10)


class CountingStore(InProcessQuotaStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def learn(self, quotas: Sequence[Quota], now: float) -> None:
        self.calls += 1
        await super().learn(quotas, now)

    async def snapshot(
        self, pairs: Sequence[tuple[str, str]], now: float
    ) -> Mapping[tuple[str, str], Quota]:
        self.calls += 1
        return await super().snapshot(pairs, now)


def _views() -> tuple[StepClock, CountingStore, QuotaView, QuotaView]:
    clock, store = StepClock(), CountingStore()
    return clock, store, QuotaView(store, REGISTRY, clock), QuotaView(store, REGISTRY, clock)


async def test_a_rate_limit_heard_by_one_proxy_holds_the_pair_on_the_other() -> None:
    clock, _store, one, other = _views()
    now = clock.now().timestamp()
    until = one.rate_limited("a", "m", {}, 2.0, now)
    assert 2.0 <= until - now <= 2.2
    assert one.admit("a", "m", COST, now) == until
    assert other.admit("a", "m", COST, now) is None  # not heard yet: nothing is known
    await one.flush()
    await other.refresh()
    assert other.admit("a", "m", COST, now + 1.0) == until
    assert other.admit("a", "m", COST, until) is None  # exactly until the hold ends


async def test_the_request_path_never_touches_the_store() -> None:
    clock, store, one, _ = _views()
    now = clock.now().timestamp()
    headers: dict[QuotaDimension, Bucket] = {
        "requests": Bucket(100, 50, now + 60),
        "tokens": Bucket(10_000, 5_000, now + 60),
    }
    one.answered("a", "m", headers, None, Usage(), now)
    for _ in range(20):
        assert one.admit("a", "m", COST, now) is None
        one.answered("a", "m", headers, COST, Usage(10, 10), now)
    one.rate_limited("a", "m", {}, 1.0, now)
    assert store.calls == 0
    await one.flush()
    assert store.calls == 1  # one batch for everything learned since the last flush


async def test_a_newer_statement_wins_and_a_proxys_own_write_does_not_undo_its_spending() -> None:
    clock, _store, one, other = _views()
    now = clock.now().timestamp()
    one.answered("a", "m", {"requests": Bucket(10, 5, now + 600)}, None, Usage(), now)
    await one.flush()
    for _ in range(5):
        assert one.admit("a", "m", Estimate(0, 0), now) is None
    assert one.admit("a", "m", Estimate(0, 0), now) is not None  # spent locally
    await one.refresh()  # its own statement comes back: not newer, the spending stays
    assert one.admit("a", "m", Estimate(0, 0), now) is not None
    clock.advance(1)
    other.answered("a", "m", {"requests": Bucket(10, 9, now + 601)}, None, Usage(), now + 1)
    await other.flush()
    await one.refresh()
    assert one.admit("a", "m", Estimate(0, 0), now + 1) is None  # the provider said 9 left


async def test_declared_limits_count_locally_and_an_unsent_request_is_given_back() -> None:
    clock, _, one, _ = _views()
    now = clock.now().timestamp()
    assert one.output_estimate("a", "local") == 7
    assert one.admit("a", "local", COST, now) is None
    refused_at = one.admit("a", "local", COST, now)
    assert refused_at == now + 60.0  # rpm 1
    one.unsent("a", "local", COST, now)
    assert one.admit("a", "local", COST, now) is None
