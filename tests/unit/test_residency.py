"""Data residency in selection: an account outside the mint's allowed providers or regions is
passed over as `residency`, a static pass-over that never makes a refusal claim a wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import Account, Candidate, Registry
from leasegate.core.ports.health import Cooldown, HealthSnapshot
from leasegate.routing.residency import Residency, narrowed
from leasegate.routing.selection import Facts, NoneEligible, Selected, cooldown_scope, select

_REGIONS = ("eu-central-1", "us-east-1", "europe-west1")
_KINDS = ("anthropic", "bedrock", "vertex", "openai")


def _account(i: int, provider: str, region: str) -> Account:
    options = {"bedrock": {"region": region}, "vertex": {"project": "p", "location": region}}
    return Account(
        id=f"acct-{i}",
        provider=provider,
        base_url="http://127.0.0.1:9",
        credential_env=f"LEASEGATE_CRED_A{i}",
        models={"m": "claude"},
        configured=True,
        options=options.get(provider, {}),
    )


_POOL = st.lists(st.tuples(st.sampled_from(_KINDS), st.sampled_from(_REGIONS)), max_size=6)
_NAMES = st.none() | st.frozensets(st.sampled_from(_KINDS), min_size=1)
_PLACES = st.none() | st.frozensets(st.sampled_from(_REGIONS), min_size=1)


def _pool(entries: list[tuple[str, str]]) -> tuple[Candidate, ...]:
    return Registry(tuple(_account(i, k, r) for i, (k, r) in enumerate(entries))).candidates("m")


def _cooling(candidates: tuple[Candidate, ...], which: set[int], now: float) -> HealthSnapshot:
    return HealthSnapshot(
        circuits={},
        cooling={
            (c.account.id, c.served_model): Cooldown(
                c.account.id, c.served_model, now + 30, "http-429", 1
            )
            for c in candidates
            if c.position in which
        },
    )


@given(_POOL, _NAMES, _PLACES, st.sets(st.integers(0, 5)))
def test_selection_never_leaves_the_residency_and_says_why(
    entries: list[tuple[str, str]],
    providers: frozenset[str] | None,
    regions: frozenset[str] | None,
    cooling: set[int],
) -> None:
    candidates = _pool(entries)
    residency = Residency(providers, regions)
    facts = Facts(now=1000.0, health=_cooling(candidates, cooling, 1000.0), residency=residency)
    outcome = select(candidates, facts)
    inside = {
        c.account.id for c in candidates if residency.allows(c.account.provider, c.account.region)
    }
    codes = {p.account_id: p.code for p in outcome.passed_over}
    for c in candidates:
        if c.account.id not in inside and c.account.id in codes:
            assert codes[c.account.id] == "residency"
        if c.account.id in inside:
            assert codes.get(c.account.id) in (None, "model-cooling")
    if isinstance(outcome, Selected):
        assert outcome.candidate.account.id in inside
        # the first allowed account that is not cooling, whatever stands before it
        first = next(c for c in candidates if c.account.id in inside and c.position not in cooling)
        assert outcome.candidate == first
    else:
        assert isinstance(outcome, NoneEligible)
        waits = [p for p in outcome.passed_over if p.code != "residency"]
        assert outcome.cooldown_scope == cooldown_scope(waits)
        if not waits:  # only residency: nothing a wait can change
            assert outcome.cooldown_scope is None
            assert outcome.retry_after_s is None
        else:
            assert outcome.cooldown_scope == "model"
            assert outcome.retry_after_s == 30


def test_an_account_without_a_region_never_satisfies_allowed_regions() -> None:
    direct = _account(0, "anthropic", "eu-central-1")
    assert direct.region is None
    assert not Residency(None, frozenset({"eu-central-1"})).allows("anthropic", None)
    assert _account(1, "bedrock", "eu-central-1").region == "eu-central-1"
    assert _account(2, "vertex", "europe-west1").region == "europe-west1"


@given(_NAMES, _PLACES, _NAMES, _PLACES)
def test_a_mint_only_narrows_the_tenants_residency(
    tenant_p: frozenset[str] | None,
    tenant_r: frozenset[str] | None,
    asked_p: frozenset[str] | None,
    asked_r: frozenset[str] | None,
) -> None:
    tenant = Residency(tenant_p, tenant_r)
    applied = narrowed(tenant, Residency(asked_p, asked_r))
    within = tenant_p is None or asked_p is None or asked_p <= tenant_p
    within_r = tenant_r is None or asked_r is None or asked_r <= tenant_r
    if not (within and within_r):
        assert isinstance(applied, str)
        return
    assert isinstance(applied, Residency)
    for kind in _KINDS:
        for region in (*_REGIONS, None):
            if applied.allows(kind, region):  # never wider than the tenant's, nor the mint's
                assert tenant.allows(kind, region)
                assert Residency(asked_p, asked_r).allows(kind, region)
