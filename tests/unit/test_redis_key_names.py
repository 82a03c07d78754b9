"""Tests name the gateway's Redis keys through `leasegate.kv.keys`, never by hand: a test that
spells a key's layout itself keeps reading the old layout after the keys change (one read
`<prefix>:slots:<account>` after hash tags moved it, and its assertions passed whatever the
gateway did)."""

from __future__ import annotations

import re
from pathlib import Path

from leasegate.kv import keys

_TESTS = Path(__file__).resolve().parents[1]
PREFIX, ID = "PFX", "ID"


def _layouts() -> set[str]:
    """Every key's and channel's own part: what follows the prefix, the ids left out."""
    made = {
        keys.circuit_key(PREFIX, ID),
        keys.pair_key(PREFIX, ID, ID),
        keys.quota_key(PREFIX, ID, ID),
        keys.slots_key(PREFIX, ID),
        keys.witness_key(PREFIX),
        keys.revocations_channel(PREFIX),
        keys.health_news_channel(PREFIX),
        keys.chain_spend_key(PREFIX, ID),
        keys.console_sessions_key(PREFIX),
    }
    parts = {part for name in made for part in name.removeprefix(PREFIX).split(ID)}
    # without the hash tags' braces too: a layout from before them is caught as well
    parts |= {part.replace("{", "").replace("}", "") for part in parts}
    return {part for part in parts if len(part.strip(":{}")) > 1}


def test_every_key_function_is_walked() -> None:
    functions = {name for name in vars(keys) if name.endswith(("_key", "_channel"))}
    assert len(functions) == 9, sorted(functions)  # a new key: add it to `_layouts`


def test_no_test_spells_a_key_layout_itself() -> None:
    layouts = _layouts()
    assert {":health:c", "}:slots", ":slots", ":audit:witness", ":{acct:"} <= layouts
    found = re.compile("|".join(re.escape(layout) for layout in sorted(layouts)))
    spelled = [
        f"{path.relative_to(_TESTS)}: {match.group()}"
        for path in sorted(_TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
        for match in found.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not spelled, spelled
