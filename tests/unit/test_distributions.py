"""Each member of the workspace imports only what its own pyproject.toml declares: its own
packages, the members it depends on (and what they declare), its third-party dependencies
and the standard library. A dependency that is only there by accident (another member's, or
one of a dependency's own) would break the first install that lacks it, like the client's or
the proxy's alone (tests/e2e/test_wheel.py installs them so)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = (
    "libs/core",
    "libs/client",
    "libs/gateway",
    "libs/db",
    "services/proxy",
    "services/control-plane",
    "services/demo",
    "services/cli",
)
IMPORT_NAMES = {
    "pyyaml": {"yaml"},
    "prometheus-client": {"prometheus_client"},
    "pydantic-settings": {"pydantic_settings"},
    "google-auth": {"google"},
    "opentelemetry-api": {"opentelemetry"},
    "opentelemetry-sdk": {"opentelemetry"},
    "opentelemetry-exporter-otlp-proto-http": {"opentelemetry"},
}
"""A distribution's import names, where they are not its name."""


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None, requirement
    return match.group(0).lower()


@cache
def _project(member: str) -> dict[str, object]:
    with (ROOT / member / "pyproject.toml").open("rb") as file:
        project: dict[str, object] = tomllib.load(file)["project"]
    return project


def _requirements(member: str) -> list[str]:
    project = _project(member)
    extras = project.get("optional-dependencies", {})
    assert isinstance(extras, dict)
    declared = project.get("dependencies", [])
    assert isinstance(declared, list)
    return [*declared, *(r for group in extras.values() for r in group)]


def _member_named(name: str) -> str:
    (member,) = [m for m in MEMBERS if _project(m)["name"] == name]
    return member


def _allowed(member: str) -> set[str]:
    """Top-level import names `member` may use: its and its member dependencies' declared
    distributions (transitively), `leasegate` and the standard library."""
    allowed = {"leasegate", *sys.stdlib_module_names}
    for requirement in _requirements(member):
        name = _name(requirement)
        if name.startswith("leasegate"):
            allowed |= _allowed(_member_named(name))
        else:
            allowed |= IMPORT_NAMES.get(name, {name.replace("-", "_")})
    return allowed


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("member", MEMBERS)
def test_a_member_imports_only_what_it_declares(member: str) -> None:
    allowed = _allowed(member)
    undeclared = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / member / "leasegate").rglob("*.py")
        for name in _imports(path) - allowed
    }
    assert not undeclared


def test_every_member_is_checked() -> None:
    found = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("*/*/pyproject.toml")}
    assert found == set(MEMBERS)


def test_the_client_declares_no_server_dependency() -> None:
    def required(member: str) -> set[str]:
        declared = _project(member)["dependencies"]
        assert isinstance(declared, list)
        return {_name(r) for r in declared}

    assert required("libs/client") == {"leasegate-core", "httpx", "sniffio"}
    assert required("libs/core") == {"pydantic"}
