"""The client can send every field the control plane takes: each request body's fields are
parameters of the client's builder for it, and a dispatch carries every mint field that is
not a hop's citation. A field added to a server body and not to the client fails here."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from leasegate.client import Budget, Dispatch, wire
from leasegate.client.leases import Identity
from leasegate.control_plane.schemas import BudgetBody, MintBody, RenewBody, StateBody

# fields the client sets itself: the path names the account, a hop's citation comes from
# the chain the dispatch keeps
_FROM_THE_PATH = {"account_id", "key_id"}
_CITATIONS = {"retry_of_mint_decision_id", "supersedes_mint_decision_id"}


def _parameters(builder: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(builder).parameters) - _FROM_THE_PATH


@pytest.mark.parametrize(
    ("body", "builder"),
    [(MintBody, wire.mint), (RenewBody, wire.renew), (StateBody, wire.set_account_state)],
)
def test_every_body_field_is_a_parameter_of_its_builder(
    body: type[BaseModel], builder: Callable[..., Any]
) -> None:
    assert set(body.model_fields) <= _parameters(builder)


def test_a_dispatch_carries_every_mint_field_but_the_citations() -> None:
    identity = {field.name for field in Identity.__dataclass_fields__.values()}
    assert set(MintBody.model_fields) - _CITATIONS == identity
    assert identity <= set(inspect.signature(Dispatch.__init__).parameters)


def test_the_clients_budget_is_a_budget_the_server_takes() -> None:
    assert set(BudgetBody.model_fields) == set(Budget.model_fields)
    both = Budget(max_tokens=500, max_cost=Decimal("1.50"))
    sent = wire.mint("acme", "d-1", "gpt-4o", budget=both).body
    assert sent is not None
    assert MintBody.model_validate(sent).budget == BudgetBody(max_tokens=500, max_cost="1.5")
    tokens_only = wire.mint("acme", "d-1", "gpt-4o", budget=Budget(max_tokens=9)).body
    assert tokens_only is not None
    assert tokens_only["budget"] == {"max_tokens": 9}
