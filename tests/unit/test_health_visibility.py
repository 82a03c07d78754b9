"""Health visibility: gauges say what the store says at scrape time, nothing stale; one log
event per cooldown or circuit that opens or closes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from leasegate.accounts import Account, Registry
from leasegate.core.observation import Classification
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.ports.health import HealthPolicy, HealthSnapshot
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.web.health_events import log_transitions
from leasegate.web.health_metrics import HealthGauges

T0 = 1_700_000_000.0
OVERLOADED = Classification("upstream-error", "model", True, "http-503")
BAD_KEY = Classification("upstream-error", "account", True, "invalid_api_key")
OK = Classification("success", None, False, None, resets_streak=True)


class StepClock:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.at, UTC)

    def monotonic(self) -> float:
        return self.at


def _registry() -> Registry:
    def account(account_id: str, models: dict[str, str]) -> Account:
        return Account(account_id, "openai", "http://upstream", "LEASEGATE_CRED_X", models, True)

    return Registry(
        (
            account("one", {"big": "big-2025", "big-latest": "big-2025", "small": "small"}),
            account("two", {"big": "big-2025"}),
        )
    )


def _sample(metrics: CollectorRegistry, name: str, **labels: str) -> float | None:
    return metrics.get_sample_value(name, labels)


async def test_gauges_follow_the_store_including_expiry() -> None:
    store = InProcessHealthStore(HealthPolicy(failure_threshold=1, account_failure_threshold=1))
    clock = StepClock(T0)
    metrics = CollectorRegistry()
    gauges = HealthGauges(metrics, _registry(), store, clock)
    await store.record("one", "big-2025", OVERLOADED, None, T0)
    await store.record("two", "big-2025", BAD_KEY, None, T0)

    await gauges.refresh()
    cooling = "leasegate_model_cooling"
    assert _sample(metrics, cooling, account="one", model="big-2025") == 1
    assert _sample(metrics, cooling, account="one", model="small") == 0
    assert _sample(metrics, cooling, account="two", model="big-2025") == 0
    assert _sample(metrics, "leasegate_account_circuit_open", account="one") == 0
    assert _sample(metrics, "leasegate_account_circuit_open", account="two") == 1

    clock.at = T0 + 30  # both ended by time alone: no event, yet the next scrape knows
    await gauges.refresh()
    assert _sample(metrics, cooling, account="one", model="big-2025") == 0
    assert _sample(metrics, "leasegate_account_circuit_open", account="two") == 0


class UnreachableStore(InProcessHealthStore):
    async def snapshot(self, pairs: Sequence[tuple[str, str]], now: float) -> HealthSnapshot:
        raise StoreUnavailable("ConnectionError")


async def test_an_unreadable_store_drops_the_series_instead_of_reporting_stale_ones() -> None:
    store = UnreachableStore(HealthPolicy())
    metrics = CollectorRegistry()
    gauges = HealthGauges(metrics, _registry(), store, StepClock(T0))
    gauges.cooling.labels("one", "big-2025").set(1)
    await gauges.refresh()
    assert _sample(metrics, "leasegate_model_cooling", account="one", model="big-2025") is None


async def test_one_log_event_per_transition_opened_or_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InProcessHealthStore(HealthPolicy(failure_threshold=1, account_failure_threshold=1))
    caplog.set_level(logging.WARNING, logger="leasegate.health")
    log_transitions(await store.record("one", "big-2025", OVERLOADED, None, T0))
    log_transitions(await store.record("one", "small", BAD_KEY, 12.0, T0))
    log_transitions(await store.record("one", "big-2025", OK, None, T0 + 1))  # both still on
    log_transitions(await store.record("one", "big-2025", OK, None, T0 + 30))  # both over
    events = [
        (r.getMessage(), r.__dict__["subject"], r.__dict__["reason"], r.__dict__["until"])
        for r in caplog.records
    ]
    assert events == [
        ("cooldown-started", "one/big-2025", "http-503", "2023-11-14T22:13:50.000Z"),
        ("circuit-opened", "one", "invalid_api_key", "2023-11-14T22:13:50.000Z"),
        ("cooldown-ended", "one/big-2025", "http-503", None),
        ("circuit-closed", "one", "invalid_api_key", None),
    ]
