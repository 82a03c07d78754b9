"""The accounts file's model entries: a served name, or a mapping that may declare a context
window and a context fallback; one-line errors for what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from leasegate.accounts.registry import AccountsFileError, parse_accounts


def _account(account_id: str, models: Any) -> dict[str, Any]:
    return {
        "id": account_id,
        "provider": "openai",
        "base_url": "https://api.example.com",
        "credential_env": "LEASEGATE_CRED_X",
        "models": models,
    }


def test_both_shapes_mix_and_declare_windows_and_fallbacks() -> None:
    registry = parse_accounts(
        {
            "accounts": [
                _account(
                    "a",
                    {
                        "small": {"served": "small-2025", "context_window": 8192,
                                  "context_fallback": "big"},
                        "plain": "plain-1",
                    },
                ),
                _account("b", {"big": {"context_window": 200000}}),
            ]
        },
        set(),
    )  # fmt: skip
    a, b = registry.accounts
    assert a.models == {"small": "small-2025", "plain": "plain-1"}
    assert (a.context_windows, a.context_fallbacks) == ({"small": 8192}, {"small": "big"})
    assert b.models == {"big": "big"}  # served defaults to the requested name
    assert registry.context_fallback("small") == "big"
    assert registry.context_fallback("plain") is None


@pytest.mark.parametrize(
    ("accounts", "message"),
    [
        ([_account("a", {"m": {"context_window": 0}})], "context_window must be a positive"),
        ([_account("a", {"m": {"context_fallback": "m"}})], "must name another model"),
        ([_account("a", {"m": {"contxt_window": 1}})], "unknown field 'contxt_window'"),
        ([_account("a", {"m": {"rpm": 60, "burst_s": 0}})], "burst_s must be a positive"),
        ([_account("a", {"m": {"rpm": 60, "burst_s": 61}})], "burst_s must be at most 60"),
        ([_account("a", {"m": {"context_fallback": "nobody"}})], "no account serves 'nobody'"),
        (
            [
                _account("a", {"m": {"context_fallback": "x"}, "x": "x", "y": "y"}),
                _account("b", {"m": {"context_fallback": "y"}}),
            ],
            "another account names 'x'",
        ),
    ],
)
def test_bad_declarations_are_one_line_errors(accounts: list[Any], message: str) -> None:
    with pytest.raises(AccountsFileError, match=message):
        parse_accounts({"accounts": accounts}, set())
