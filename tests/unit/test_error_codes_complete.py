"""Every error code the gateway can send is in the one table (`leasegate.core.errors.CODES`)
and in docs/api.md's; the documentation names no code the table lacks.

The codes are read from the source itself, so a new `GatewayError("some-code", ...)` that
skips the table or the documentation fails here, before any caller meets it. A code is
"raised" when a string literal is
- the first argument of `GatewayError(...)` (anywhere in the expression: `a if x else "b"`);
- passed to a function that hands one of its parameters to `GatewayError` as the code
  (`known_id(key_id, "key-not-found")`, `_refused("key-invalid", ...)`);
- a keyword argument named `code` or `*_code` (`Observation(refusal_code=...)`), or the code
  of a `PassOver(account, code)` (selection's pass-over codes are sent, and a renewal
  raises them);
- a value of a dict whose name ends in `_CODES` (the HTTP status mapping), or a member of a
  `Literal` type whose name ends in `Code` (`BlockCode`: what the health store refuses with).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from leasegate.core.errors import CODES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "libs", ROOT / "services"]
API_DOC = ROOT / "docs" / "api.md"


def _modules() -> Iterator[ast.Module]:
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            yield ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _literals(node: ast.AST | None) -> set[str]:
    """The strings an expression can evaluate to as written: a literal, either branch of a
    conditional, either side of an `or`; nothing read from data (`error["code"]`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _literals(node.body) | _literals(node.orelse)
    if isinstance(node, ast.BoolOp):
        return set().union(*(_literals(value) for value in node.values))
    if isinstance(node, ast.Subscript) and _is_literal_type(node):
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return set().union(*(_literals(element) for element in elements))
    return set()


def _is_literal_type(node: ast.Subscript) -> bool:
    value = node.value
    return (isinstance(value, ast.Name) and value.id == "Literal") or (
        isinstance(value, ast.Attribute) and value.attr == "Literal"
    )


def _forwarders(modules: list[ast.Module]) -> dict[str, tuple[int, str]]:
    """Functions that pass one of their parameters to GatewayError as its code:
    name -> (the parameter's position, its name)."""
    found: dict[str, tuple[int, str]] = {}
    for module in modules:
        for function in ast.walk(module):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            params = [p for p in params if p not in ("self", "cls")]  # not in a call's args
            for call in ast.walk(function):
                if not (isinstance(call, ast.Call) and _name(call) == "GatewayError"):
                    continue
                first = call.args[0] if call.args else None
                if isinstance(first, ast.Name) and first.id in params:
                    found[function.name] = (params.index(first.id), first.id)
    return found


def _assigned(node: ast.Assign) -> set[str]:
    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    codes: set[str] = set()
    if isinstance(node.value, ast.Dict) and any(n.endswith("_CODES") for n in names):
        codes = set().union(*(_literals(value) for value in node.value.values))
    if any(n.endswith("Code") for n in names):  # BlockCode = Literal[...]
        codes |= _literals(node.value)
    return codes


def _passed(call: ast.Call, forwarders: dict[str, tuple[int, str]]) -> set[str]:
    name = _name(call)
    codes: set[str] = set()
    if name == "GatewayError" and call.args:
        codes |= _literals(call.args[0])
    if name == "PassOver" and len(call.args) > 1:
        codes |= _literals(call.args[1])
    if name in forwarders:
        position, parameter = forwarders[name]
        if len(call.args) > position:
            codes |= _literals(call.args[position])
        codes |= {v for k in call.keywords if k.arg == parameter for v in _literals(k.value)}
    for keyword in call.keywords:
        if keyword.arg is not None and (keyword.arg == "code" or keyword.arg.endswith("_code")):
            codes |= _literals(keyword.value)
    return codes


def raised_codes() -> set[str]:
    modules = list(_modules())
    forwarders = _forwarders(modules)
    codes: set[str] = set()
    for module in modules:
        for node in ast.walk(module):
            if isinstance(node, ast.Assign):
                codes |= _assigned(node)
            elif isinstance(node, ast.Call):
                codes |= _passed(node, forwarders)
    return codes


def documented_codes() -> set[str]:
    """The codes in docs/api.md's `## Error codes` table (first column)."""
    text = API_DOC.read_text(encoding="utf-8")
    table = text.split("## Error codes", 1)[1].split("\n## ", 1)[0]
    codes: set[str] = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            codes |= set(re.findall(r"`([a-z0-9-]+)`", first_cell))
    return codes


def test_the_source_scan_finds_the_codes_it_should() -> None:
    # the scan itself works: codes raised in each of the ways the docstring lists
    found = raised_codes()
    assert {"citation-conflict", "key-not-found", "key-invalid", "model-cooling"} <= found
    assert {"method-not-allowed", "lease-capacity-exhausted"} <= found
    assert len(found) >= 30


def test_every_code_the_gateway_raises_is_in_the_table() -> None:
    assert sorted(raised_codes() - set(CODES)) == []


def test_every_code_in_the_table_is_documented_and_nothing_else_is() -> None:
    documented = documented_codes()
    assert sorted(set(CODES) - documented) == []
    assert sorted(documented - set(CODES)) == []
