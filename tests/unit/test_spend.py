"""Spend arithmetic: exact decimal costs, the providers' two token conventions, prices in the
accounts file, and the bound on how far concurrent requests can overshoot a budget."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.accounts import AccountsFileError, parse_accounts
from leasegate.spend import Budget, Prices, Spent, TokenCounts, cost_of, exhausted, parse_prices

PRICES = Prices(Decimal("2.50"), Decimal("10.00"), cache_read=Decimal("1.25"))


def test_an_openai_request_is_charged_for_uncached_input_cached_input_and_output() -> None:
    # prompt_tokens 1200 of which 400 cached, 300 completion tokens
    tokens = TokenCounts(1200, 300, cache_read_input_tokens=400, input_includes_cache=True)
    expected = (800 * Decimal("2.50") + 400 * Decimal("1.25") + 300 * Decimal("10.00")) / 10**6
    assert cost_of(tokens, PRICES) == expected == Decimal("0.0055")
    assert tokens.total == 1500


def test_an_anthropic_request_counts_cache_reads_and_writes_beside_its_input() -> None:
    tokens = TokenCounts(100, 50, cache_read_input_tokens=1000, cache_creation_input_tokens=200)
    prices = Prices(Decimal(3), Decimal(15), Decimal("0.30"), Decimal("3.75"))
    expected = (100 * 3 + 50 * 15 + 1000 * Decimal("0.30") + 200 * Decimal("3.75")) / Decimal(10**6)
    assert cost_of(tokens, prices) == expected
    assert tokens.total == 1350


def test_a_cost_is_rounded_once_half_even_to_a_billionth() -> None:
    one_token = TokenCounts(1, 0)
    assert cost_of(one_token, Prices(Decimal("0.0005"), Decimal(0))) == Decimal("0.000000000")
    assert cost_of(one_token, Prices(Decimal("0.0015"), Decimal(0))) == Decimal("0.000000002")
    assert cost_of(TokenCounts(3, 0), Prices(Decimal("0.1"), Decimal(0))) == Decimal("3E-7")


def test_no_prices_or_no_usage_is_an_unknown_cost_not_zero() -> None:
    assert cost_of(TokenCounts(10, 10), None) is None
    assert cost_of(TokenCounts(None, None), PRICES) is None


def test_cache_prices_default_to_the_input_price() -> None:
    tokens = TokenCounts(10, 0, cache_read_input_tokens=10, cache_creation_input_tokens=10)
    assert cost_of(tokens, Prices(Decimal(1), Decimal(0))) == Decimal("0.00003")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"input": 2.5, "output": "1"}, "decimal string"),
        ({"input": "-1", "output": "1"}, "non-negative"),
        ({"input": "NaN", "output": "1"}, "finite"),
        ({"input": "1"}, "'output' is required"),
        ({"input": "1", "output": "1", "cached": "1"}, "unknown field 'cached'"),
        ("2.50", "must be a mapping"),
    ],
)
def test_bad_prices_are_named(raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_prices(raw)


def _document(models: object, **top: object) -> dict[str, object]:
    account = {
        "id": "a",
        "provider": "openai",
        "base_url": "https://api.example.com",
        "credential_env": "LEASEGATE_CRED_A",
        "models": models,
    }
    return {"accounts": [account], **top}


def test_the_accounts_file_gives_prices_per_model_in_one_currency() -> None:
    registry = parse_accounts(
        _document(
            {
                "gpt-4o": {
                    "served": "gpt-4o-2024-08-06",
                    "prices": {"input": "2.5", "output": "10"},
                },
                "mini": "mini-served",
            },
            currency="USD",
        ),
        set(),
    )
    account = registry.accounts[0]
    assert registry.currency == "USD"
    assert dict(account.models) == {"gpt-4o": "gpt-4o-2024-08-06", "mini": "mini-served"}
    assert account.prices == {"gpt-4o": Prices(Decimal("2.5"), Decimal(10))}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_document({"m": {"prices": {"input": "1", "output": "1"}}}), "'currency' must be named"),
        (_document({"m": "m"}, currency="dollars"), "'currency' must be a code"),
        (_document({"m": {"served": "m", "price": {}}}), "unknown field 'price'"),
        (_document({"m": {"prices": {"input": 1.5, "output": "1"}}}, currency="EUR"), "'input'"),
    ],
)
def test_bad_model_entries_fail_start_up_naming_the_field(
    document: dict[str, object], message: str
) -> None:
    with pytest.raises(AccountsFileError, match=message):
        parse_accounts(document, set())


def test_a_budget_is_exhausted_once_either_bound_is_reached() -> None:
    budget = Budget(max_tokens=100, max_cost=Decimal("1.00"))
    assert not exhausted(budget, Spent(99, Decimal("0.99")))
    assert exhausted(budget, Spent(100, Decimal(0)))
    assert exhausted(budget, Spent(0, Decimal("1.00")))
    assert not exhausted(Budget(), Spent(10**9, Decimal(10**9)))


@given(
    budget=st.integers(min_value=1, max_value=10_000),
    in_flight=st.integers(min_value=1, max_value=16),
    costs=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=200),
    order=st.randoms(use_true_random=False),
)
def test_a_chain_overshoots_its_budget_by_at_most_what_in_flight_requests_spend(
    budget: int, in_flight: int, costs: list[int], order: random.Random
) -> None:
    """Requests are admitted against the recorded total and add to it when they finish, in any
    interleaving with at most `in_flight` at once: the total ends below budget + in_flight x
    the largest single request."""
    limit = Budget(max_tokens=budget)
    spent = Spent()
    pending: list[int] = []
    queue = list(costs)
    while queue or pending:
        if queue and len(pending) < in_flight and (not pending or order.random() < 0.5):
            cost = queue.pop(0)
            if not exhausted(limit, spent):
                pending.append(cost)  # admitted
        elif pending:
            spent = spent.plus(pending.pop(order.randrange(len(pending))), None)
    assert spent.tokens <= budget - 1 + in_flight * max(costs)


def test_a_priced_row_survives_the_evidence_spill_file_exactly() -> None:
    from dataclasses import replace
    from datetime import UTC, datetime

    from leasegate.proxy.evidence_spill import decode_row, encode_row
    from tests.fixtures.evidence import evidence_row

    row = replace(
        evidence_row("req_1", datetime(2026, 12, 1, tzinfo=UTC)), cost=Decimal("0.000000301")
    )
    assert decode_row(encode_row(row)) == row
