"""The chain's corruption is worded once (leasegate.audit): a mint held, the overlay's view
held and an operator's change refused all say the same thing, with the same code where they
mean the same thing."""

from __future__ import annotations

import ast
from pathlib import Path

from leasegate.audit import CHAIN_DOES_NOT_VERIFY, ChainVerdict, corrupt_error, held_while_corrupt

ROOT = Path(__file__).resolve().parents[2]


def _worded_in(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return any(
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "does not verify" in node.value
        and id(node) not in docstrings
        for node in ast.walk(tree)
    )


def test_the_chain_refusal_is_worded_in_one_module() -> None:
    homes = {
        path.relative_to(ROOT).as_posix()
        for folder in ("libs", "services")
        for path in (ROOT / folder).rglob("*.py")
        if _worded_in(path)
    }
    assert homes == {"libs/gateway/leasegate/audit/fold.py"}


def test_both_refusals_carry_the_one_wording() -> None:
    held = held_while_corrupt()
    assert held.code == "account-state-unavailable"
    assert held.message.startswith(CHAIN_DOES_NOT_VERIFY)
    verdict = ChainVerdict("corrupt", 7, "0" * 64, first_bad_seq=7, problem="hash-mismatch")
    refused = corrupt_error(verdict)
    assert refused.code == "audit-chain-corrupt"
    assert refused.message.startswith(CHAIN_DOES_NOT_VERIFY)
