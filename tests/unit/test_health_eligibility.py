"""One health eligibility rule: a mint's selection and a proxied request's admission refuse
on exactly the same health, with the same code (`routing.health.blocking`)."""

from __future__ import annotations

import pytest

from leasegate.accounts import Account, Registry
from leasegate.core.observation import Classification
from leasegate.core.ports.health import Cooldown, HealthPolicy
from leasegate.kv.health_memory import InProcessHealthStore
from leasegate.routing.health import block_code
from leasegate.routing.selection import Facts, filter_code

T0 = 1_700_000_000.0
MODEL_FAILURE = Classification("upstream-error", "model", True, "http-503")
ACCOUNT_FAILURE = Classification("upstream-error", "account", True, "http-401")
ACCOUNT = Account("one", "openai", "http://upstream", "LEASEGATE_CRED_X", {"big": "big-2025"}, True)


@pytest.mark.parametrize(
    ("circuit_open", "pair_cooling", "refusal"),
    [
        (False, False, None),
        (False, True, "model-cooling"),
        (True, False, "circuit-open"),
        (True, True, "circuit-open"),  # the circuit is asked first, everywhere
    ],
)
async def test_the_mint_and_the_proxy_refuse_on_the_same_health_with_the_same_code(
    circuit_open: bool, pair_cooling: bool, refusal: str | None
) -> None:
    store = InProcessHealthStore(HealthPolicy(failure_threshold=1, account_failure_threshold=1))
    if circuit_open:
        await store.record("one", "big-2025", ACCOUNT_FAILURE, None, T0)
    if pair_cooling:
        await store.record("one", "big-2025", MODEL_FAILURE, None, T0)
    now = T0 + 1

    snapshot = await store.snapshot([("one", "big-2025")], now)
    candidate = Registry((ACCOUNT,)).candidates("big")[0]
    at_mint = filter_code(candidate, Facts(now=now, health=snapshot))
    admission = await store.admit("one", "big-2025", now)
    at_proxy = block_code(admission) if isinstance(admission, Cooldown) else None

    assert at_mint == at_proxy == refusal
