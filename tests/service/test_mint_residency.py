"""Data residency as a service: a tenant's configured providers and regions, narrowed by a
mint's own, decide which accounts a mint may land on; a hop keeps its chain's restriction.
In-memory twins (the decision's columns have their store round trip in tests/e2e)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from leasegate.accounts import Account
from leasegate.control_plane import keys
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from leasegate.routing.residency import Residency
from tests.fixtures.control import (
    MODEL,
    SERVED,
    T0,
    Control,
    body,
    control,
    last_decision,
    skipped,
    terminal_row,
)


def _cloud(account_id: str, provider: str, region: str = "") -> Account:
    options = {"bedrock": {"region": region}, "vertex": {"project": "p", "location": region}}
    return Account(
        id=account_id,
        provider=provider,
        base_url="http://127.0.0.1:9",
        credential_env=f"KEY_{account_id.upper()}",
        models={MODEL: SERVED},
        configured=True,
        options=options.get(provider, {}) if region else {},
    )


def pool(tenant_residency: dict[str, Residency] | None = None) -> Control:
    """anthropic first, then bedrock in us-east-1, bedrock in eu-central-1, vertex in Europe."""
    c = control(
        _cloud("direct", "anthropic"),
        _cloud("br-us", "bedrock", "us-east-1"),
        _cloud("br-eu", "bedrock", "eu-central-1"),
        _cloud("vx-eu", "vertex", "europe-west1"),
    )
    limits = replace(c.deps.limits, tenant_residency=tenant_residency or {})
    c.deps = replace(c.deps, limits=limits)
    return c


EU_BEDROCK = Residency(frozenset({"bedrock"}), frozenset({"eu-central-1"}))


async def refused(c: Control, *args: object) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, *args)  # type: ignore[arg-type]
    return caught.value


async def test_a_tenant_restricted_to_eu_bedrock_lands_there_and_says_why_not_first() -> None:
    c = pool({"acme": EU_BEDROCK})
    await mint(c.deps, body())
    chosen = last_decision(c)
    assert chosen.account_id == "br-eu"
    assert skipped(chosen) == [("direct", "residency"), ("br-us", "residency")]
    await mint(c.deps, body("d2", tenant="other"))  # another tenant: the pool's order
    assert last_decision(c).account_id == "direct"


async def test_a_mint_may_narrow_its_tenants_restriction_but_never_widen_it() -> None:
    c = pool({"acme": Residency(frozenset({"bedrock", "vertex"}), None)})
    await mint(c.deps, body(allowed_regions=["europe-west1"]))
    assert last_decision(c).account_id == "vx-eu"
    assert last_decision(c).allowed_regions == ("europe-west1",)
    error = await refused(c, body("d2", allowed_providers=["anthropic"]))
    assert (error.code, error.status) == ("invalid-request", 400)


async def test_only_residency_pass_overs_refuse_without_a_wait() -> None:
    c = pool({"acme": Residency(None, frozenset({"ap-south-1"}))})
    error = await refused(c, body())
    assert error.code == "no-eligible-account"
    assert error.retry_after_s is None
    assert error.cooldown_scope is None
    assert {p.code for p in error.passed_over} == {"residency"}


async def test_a_cooling_allowed_account_is_the_only_wait_a_refusal_names() -> None:
    c = pool({"acme": EU_BEDROCK})
    c.health.cooling[("br-eu", SERVED)] = Cooldown(
        "br-eu", SERVED, T0.timestamp() + 20, "http-429", 1
    )
    error = await refused(c, body())
    assert error.cooldown_scope == "model"  # the residency pass-overs are not `account`
    assert error.retry_after_s == pytest.approx(20)


async def test_a_hop_keeps_its_chains_restriction_and_may_not_name_another() -> None:
    c = pool()
    await mint(c.deps, body(allowed_providers=["bedrock"]))
    first = last_decision(c)
    assert first.account_id == "br-us"
    c.store.evidence.append(terminal_row(first, "req-1"))
    await keys.revoke(c.deps, first.key_id or "")
    error = await refused(c, body(retry_of_mint_decision_id=first.id, allowed_providers=["vertex"]))
    assert error.code == "invalid-request"
    await mint(c.deps, body(retry_of_mint_decision_id=first.id))  # none named: inherited
    hop = last_decision(c)
    assert hop.account_id == "br-eu"  # never vertex, though it stands after
    assert hop.allowed_providers == ("bedrock",)


@pytest.mark.parametrize(
    "fields",
    [
        {"allowed_providers": ["aws"]},
        {"allowed_providers": []},
        {"allowed_regions": ["EU Central"]},
        {"allowed_regions": "eu-central-1"},
    ],
)
def test_unknown_kinds_and_malformed_regions_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        body(**fields)
