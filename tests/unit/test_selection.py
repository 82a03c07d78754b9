"""Selection walks candidates in registry order and reports the first filter per pass-over."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import Account, Candidate, Registry
from leasegate.core.errors import PassOver
from leasegate.core.ports.health import Cooldown, HealthSnapshot
from leasegate.core.ports.quota import Bucket, Quota, QuotaDimension
from leasegate.routing.selection import Facts, NoneEligible, Selected, cooldown_scope, select


def _account(i: int, *, configured: bool = True, lease_capacity: int | None = None) -> Account:
    return Account(
        id=f"acct-{i}",
        provider="openai",
        base_url=f"http://127.0.0.1:{9000 + i}",
        credential_env=f"LEASEGATE_CRED_A{i}",
        models={"m": f"served-{i}", "other": "other"},
        configured=configured,
        lease_capacity=lease_capacity,
    )


def _health(
    now: float,
    circuits: dict[str, float] | None = None,
    cooling: dict[tuple[str, str], float] | None = None,
) -> HealthSnapshot:
    """What a store's snapshot read at `now` holds: only the entries still active then."""
    return HealthSnapshot(
        circuits={
            a: Cooldown(a, None, until, "http-401", 1)
            for a, until in (circuits or {}).items()
            if until > now
        },
        cooling={
            (a, m): Cooldown(a, m, until, "http-503", 1)
            for (a, m), until in (cooling or {}).items()
            if until > now
        },
    )


def _candidates(*accounts: Account) -> tuple[Candidate, ...]:
    return Registry(accounts).candidates("m")


def test_first_eligible_in_registry_order() -> None:
    chosen = select(_candidates(_account(0), _account(1)), Facts(now=0))
    assert isinstance(chosen, Selected)
    assert chosen.candidate.account.id == "acct-0"
    assert chosen.passed_over == ()


def test_filters_in_spec_order_first_applicable_is_the_code() -> None:
    accounts = [_account(i, lease_capacity=1) for i in range(7)]
    accounts[0] = _account(0, configured=False)
    # acct-5 is at its lease ceiling (its quota is empty too); acct-6 has lease room, an empty quota
    empty: dict[QuotaDimension, Bucket] = {"requests": Bucket(60, 0, 130.0)}
    quotas = {
        (f"acct-{i}", f"served-{i}"): Quota(f"acct-{i}", f"served-{i}", empty, "headers", 100)
        for i in (5, 6)
    }
    facts = Facts(
        now=100,
        admin_states={"acct-0": "disabled", "acct-1": "disabled", "acct-2": "draining"},
        health=_health(
            100,
            circuits={"acct-2": 200, "acct-3": 200},
            cooling={("acct-3", "served-3"): 300, ("acct-4", "served-4"): 150},
        ),
        leases_held={"acct-4": 1, "acct-5": 1},
        quotas=quotas,
    )
    outcome = select(_candidates(*accounts), facts)
    assert isinstance(outcome, NoneEligible)
    assert [p.code for p in outcome.passed_over] == [
        "not-configured",
        "administratively-disabled",
        "administratively-draining",
        "circuit-open",
        "model-cooling",
        "lease-capacity-exhausted",
        "quota-exhausted",
    ]
    assert outcome.cooldown_scope == "mixed"
    assert outcome.retry_after_s == 0.5  # acct-6's bucket holds a request again soonest


def test_cooling_is_per_served_model_and_expires_by_time() -> None:
    candidates = _candidates(_account(0))
    until = {("acct-0", "served-0"): 20.0}
    cooling = Facts(now=10, health=_health(10, cooling=until))
    refused = select(candidates, cooling)
    assert isinstance(refused, NoneEligible)
    assert refused.cooldown_scope == "model"
    assert refused.retry_after_s == 10
    other = Registry((_account(0),)).candidates("other")
    assert isinstance(select(other, cooling), Selected)
    later = Facts(now=20, health=_health(20, cooling=until))
    assert isinstance(select(candidates, later), Selected)


def test_scope_account_when_no_pass_over_was_cooling() -> None:
    outcome = select(_candidates(_account(0, configured=False)), Facts(now=0))
    assert isinstance(outcome, NoneEligible)
    assert outcome.cooldown_scope == "account"
    assert outcome.retry_after_s is None


def test_start_position_skips_earlier_candidates() -> None:
    chosen = select(_candidates(_account(0), _account(1)), Facts(now=0), start=1)
    assert isinstance(chosen, Selected)
    assert chosen.candidate.position == 1
    assert isinstance(select(_candidates(_account(0)), Facts(now=0), start=1), NoneEligible)


codes = st.sampled_from(
    ["not-configured", "administratively-disabled", "model-cooling", "circuit-open"]
)


@given(st.lists(codes, min_size=1, max_size=6))
def test_cooldown_scope_is_model_only_when_all_cooling(seen: list[str]) -> None:
    scope = cooldown_scope([PassOver(f"a{i}", c) for i, c in enumerate(seen)])
    if all(c == "model-cooling" for c in seen):
        assert scope == "model"
    elif "model-cooling" not in seen:
        assert scope == "account"
    else:
        assert scope == "mixed"


@given(st.integers(min_value=0, max_value=5), st.sets(st.integers(min_value=0, max_value=5)))
def test_selection_takes_the_first_eligible_at_or_after_start(start: int, down: set[int]) -> None:
    accounts = [_account(i, configured=i not in down) for i in range(6)]
    outcome = select(_candidates(*accounts), Facts(now=0), start=start)
    eligible = [i for i in range(start, 6) if i not in down]
    if eligible:
        assert isinstance(outcome, Selected)
        assert outcome.candidate.position == eligible[0]
        assert len(outcome.passed_over) == eligible[0] - start
    else:
        assert isinstance(outcome, NoneEligible)
        assert len(outcome.passed_over) == 6 - start
