"""The client can send every field the control plane takes.

The request bodies are `leasegate.wire`'s models, read by the control plane and built by the
client. Here: every route that takes a body declares one of them; each body is sent by one
client method, whose parameters name every field the body has (on `ControlClient` and
`AsyncControlClient` alike), and a value given for each reaches the body the server reads;
a dispatch carries every mint field but a hop's citations. A field added to a server body and
not to the client fails here.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from leasegate.cli.main import _parser
from leasegate.client import AsyncControlClient, Budget, ControlClient, Dispatch, wire
from leasegate.client.leases import Identity
from leasegate.config import load_config
from leasegate.control_plane.app import create_control_plane_app
from leasegate.wire import (
    AuditedBody,
    BudgetBody,
    MintBody,
    RenewBody,
    RequestBody,
    StateBody,
    TenantBudgetBody,
)
from tests.fixtures.gateways import gateway_env

SENDER: dict[type[RequestBody], str] = {
    MintBody: "mint",
    RenewBody: "renew",
    StateBody: "set_account_state",
    TenantBudgetBody: "set_tenant_budget",
}
"""Each body, and the client method that sends it."""
PARTS = {BudgetBody: MintBody}
"""Bodies sent only inside another (the mint's `budget`): `Budget` on the client's side."""
BASES = {RequestBody, AuditedBody}
CITATIONS = {"retry_of_mint_decision_id", "supersedes_mint_decision_id"}
"""A hop's citations: `Dispatch` sets them from the chain it keeps."""

# The path's part of each call, then one value per body field (a set and a cleared tenant
# budget between them name every field: `clear` takes no bound).
CALLS: list[tuple[type[RequestBody], tuple[object, ...], dict[str, Any]]] = [
    (
        MintBody,
        (),
        {
            "tenant": "acme/web",
            "dispatch_id": "d-81",
            "model": "gpt-4o",
            "role": "implementer",
            "ttl_s": 600,
            "retry_of_mint_decision_id": "md_1",
            "supersedes_mint_decision_id": "md_2",
            "budget": Budget(max_tokens=5000, max_cost=Decimal("2.50")),
            "affinity": "session-7",
            "allowed_providers": ["openai", "bedrock"],
            "allowed_regions": ["eu-central-1"],
        },
    ),
    (RenewBody, ("k_1",), {"ttl_s": 120}),
    (
        StateBody,
        ("openai-main",),
        {"state": "draining", "expected_revision": 3, "reason": "rotation", "on_behalf_of": "b"},
    ),
    (
        TenantBudgetBody,
        ("acme/web",),
        {
            "expected_revision": 4,
            "reason": "quarter",
            "on_behalf_of": "finance",
            "period": "month",
            "max_tokens": 10**9,
            "max_cost": Decimal("250.00"),
        },
    ),
    (TenantBudgetBody, ("acme/web",), {"expected_revision": 5, "reason": "over", "clear": True}),
]


def _request_bodies() -> set[type[RequestBody]]:
    found: set[type[RequestBody]] = set()
    pending = [RequestBody]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.add(sub)
            pending.append(sub)
    return {body for body in found if body.__module__.startswith("leasegate.wire")} - BASES


def _parameters(method: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(method).parameters)


def test_every_request_body_is_sent_by_a_client_method() -> None:
    assert _request_bodies() == set(SENDER) | set(PARTS)


@pytest.mark.parametrize("client", [ControlClient, AsyncControlClient])
@pytest.mark.parametrize("call", range(len(CALLS)), ids=lambda i: CALLS[i][0].__name__)
async def test_each_client_method_sends_every_field_it_is_given(
    client: type[ControlClient | AsyncControlClient], call: int
) -> None:
    """Called as a caller calls it, the method sends the builder's request, every field."""
    body, path, values = CALLS[call]
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(400, json={"error": {"code": "bad-request", "message": "-"}})

    transport = httpx.MockTransport(record)
    method_name = SENDER[body]
    expected = getattr(wire, method_name)(*path, **values)
    if client is ControlClient:
        with ControlClient("http://cp", "token", transport=transport) as blocking, _refused():
            getattr(blocking, method_name)(*path, **values)
    else:
        async with AsyncControlClient("http://cp", "token", transport=transport) as awaited:
            with _refused():
                await getattr(awaited, method_name)(*path, **values)
    assert len(sent) == 1
    request = sent[0]
    assert (request.method, request.url.raw_path.decode()) == (expected.method, expected.path)
    assert json.loads(request.content) == expected.json()
    assert set(json.loads(request.content)) == set(values)  # every field given, no more


@contextlib.contextmanager
def _refused() -> Iterator[None]:
    """The recording transport answers 400: the method's refusal is expected, not its value."""
    with contextlib.suppress(Exception):
        yield


def test_every_field_given_to_the_client_is_in_the_body_the_server_reads() -> None:
    covered: dict[type[RequestBody], set[str]] = {body: set() for body in SENDER}
    for body, path, values in CALLS:
        operation = getattr(wire, SENDER[body])(*path, **values)
        assert isinstance(operation.body, body)
        sent = operation.json()
        assert sent is not None
        read = body.model_validate(sent)  # the server's own reading of it
        assert set(sent) == set(values), body.__name__  # every value given is sent, no more
        assert read.model_fields_set == set(values)
        covered[body] |= set(values)
    for body, names in covered.items():
        assert names == set(body.model_fields), f"no value given for {body.__name__}'s fields"


def test_values_reach_the_body_as_given() -> None:
    _, _, values = CALLS[0]
    sent = wire.mint(**values).json()
    assert sent is not None
    assert sent["budget"] == {"max_tokens": 5000, "max_cost": "2.5"}
    assert sent["allowed_providers"] == ["openai", "bedrock"]
    tenant = wire.set_tenant_budget("acme/web", **CALLS[3][2]).json()
    assert tenant is not None
    assert (tenant["max_cost"], tenant["period"]) == ("250", "month")
    assert wire.renew("k_1").json() == {}  # nothing set: the server's default TTL


def test_a_dispatch_carries_every_mint_field_but_the_citations() -> None:
    identity = {field.name for field in Identity.__dataclass_fields__.values()}
    assert set(MintBody.model_fields) - CITATIONS == identity
    assert identity <= _parameters(Dispatch.__init__)


def test_the_clients_budget_is_a_budget_the_server_takes() -> None:
    assert set(BudgetBody.model_fields) == set(Budget.model_fields)
    both = Budget(max_tokens=500, max_cost=Decimal("1.50"))
    sent = wire.mint("acme", "d-1", "gpt-4o", budget=both).json()
    assert sent is not None
    assert MintBody.model_validate(sent).budget == BudgetBody(max_tokens=500, max_cost="1.5")
    tokens_only = wire.mint("acme", "d-1", "gpt-4o", budget=Budget(max_tokens=9)).json()
    assert tokens_only is not None
    assert tokens_only["budget"] == {"max_tokens": 9}


def test_a_body_the_server_would_refuse_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ValueError, match="a budget needs"):
        wire.mint("acme", "d-1", "gpt-4o", budget=Budget())
    with pytest.raises(ValueError, match="clear takes no"):
        wire.set_tenant_budget("acme", expected_revision=0, reason="r", clear=True, max_tokens=1)
    with pytest.raises(ValueError, match="control character"):
        wire.set_account_state("a", "disabled", expected_revision=0, reason="bad\x00")


def test_every_route_that_takes_a_body_takes_a_wire_request_body(tmp_path: Path) -> None:
    """The control plane's OpenAPI document names each route's body; each is a body above
    (the renewal reads its optional body itself, so the document shows none)."""
    env = gateway_env(tmp_path, [_account()])
    document = create_control_plane_app(load_config(env)).openapi()
    taken: dict[str, str] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                schema = operation["requestBody"]["content"]["application/json"]["schema"]
                taken[f"{method.upper()} {path}"] = schema["$ref"].rsplit("/", 1)[-1]
    assert taken == {
        "POST /control/v2/keys": "MintBody",
        "POST /control/v2/accounts/{account_id}/state": "StateBody",
        "POST /control/v2/tenants/{tenant}/budget": "TenantBudgetBody",
    }
    assert set(taken.values()) <= {body.__name__ for body in SENDER}
    schemas = document["components"]["schemas"]
    for name in taken.values():
        body = next(body for body in SENDER if body.__name__ == name)
        assert set(schemas[name]["properties"]) == set(body.model_fields), name


def _account() -> dict[str, Any]:
    return {
        "id": "openai-main",
        "provider": "openai",
        "base_url": "http://127.0.0.1:9",
        "credential_env": "LEASEGATE_CRED_OPENAI_MAIN",
        "models": {"gpt-4o": "gpt-4o"},
    }


async def test_a_dispatch_the_control_plane_would_refuse_is_refused_when_built() -> None:
    async with AsyncControlClient("http://127.0.0.1:9", "token") as control:
        with pytest.raises(ValueError, match="tenant"):
            Dispatch(control, "http://127.0.0.1:9", tenant="a b", dispatch_id="d", model="m")
        with pytest.raises(ValueError, match="a budget needs"):
            Dispatch(
                control,
                "http://127.0.0.1:9",
                tenant="a",
                dispatch_id="d",
                model="m",
                budget=Budget(),
            )


FROM_THE_CHAIN = {"expected_revision"}
"""The CLI reads the chain's revision itself just before the change."""


@pytest.mark.parametrize(
    ("argv", "body", "from_the_command"),
    [
        (["tenants", "budget", "acme/web", "--reason", "r"], TenantBudgetBody, set()),
        (["accounts", "drain", "openai-main", "--reason", "r"], StateBody, {"state"}),
    ],
    ids=["tenants budget", "accounts drain"],
)
def test_the_cli_takes_every_field_of_the_body_it_sends(
    argv: list[str], body: type[RequestBody], from_the_command: set[str]
) -> None:
    options = set(vars(_parser().parse_args(argv)))
    missing = set(body.model_fields) - FROM_THE_CHAIN - from_the_command - options
    assert not missing, f"`leasegate {' '.join(argv[:2])}` cannot send {sorted(missing)}"
