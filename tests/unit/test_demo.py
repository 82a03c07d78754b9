"""`leasegate dev --demo`: the bundled accounts on the chosen port, and a banner that shows
the demo's own tokens but never one the operator set."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from leasegate.cli.demo import (
    DEMO_ADMIN_TOKEN,
    DEMO_CONTROL_TOKEN,
    demo_accounts_text,
    demo_banner,
    demo_defaults,
)
from leasegate.config import load_config


def test_demo_accounts_point_at_the_demo_port() -> None:
    text = demo_accounts_text(9123)
    assert "http://127.0.0.1:9123" in text
    assert "127.0.0.1:8090" not in text


@pytest.mark.parametrize(
    ("module", "left_out"),
    [("botocore", ["demo-bedrock"]), ("google.auth", ["demo-vertex", "demo-vertex-gemini"])],
)
def test_a_cloud_account_without_its_extra_is_left_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: str, left_out: list[str]
) -> None:
    find_spec = importlib.util.find_spec

    def without(name: str, package: str | None = None) -> object:
        if name == module and "." in name:  # as without its parent package (`google`)
            raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}")
        return None if name == module else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without)
    ids = [a["id"] for a in yaml.safe_load(demo_accounts_text(9123))["accounts"]]
    assert not set(ids) & set(left_out)
    assert {"demo-openai", "demo-anthropic"} <= set(ids)
    config = load_config({}, defaults=demo_defaults(9123, tmp_path))  # and the demo starts
    assert [a.id for a in config.registry.accounts] == ids


def test_banner_prints_the_demo_tokens_and_a_fresh_database(tmp_path: Path) -> None:
    defaults = demo_defaults(9123, tmp_path)
    config = load_config({}, defaults=defaults)
    assert [a.id for a in config.registry.accounts] == [
        "demo-openai",
        "demo-anthropic",
        "demo-bedrock",
        "demo-vertex",
        "demo-vertex-gemini",
    ]
    assert all(a.configured for a in config.registry.accounts)
    banner = demo_banner("http://127.0.0.1:8080", 9123, config, defaults["LEASEGATE_DATABASE_URL"])
    assert f"control token: {DEMO_CONTROL_TOKEN}" in banner
    assert f"LEASEGATE_ADMIN_TOKEN={DEMO_ADMIN_TOKEN}" in banner
    assert "fresh" in banner


def test_banner_never_prints_an_operators_own_token(tmp_path: Path) -> None:
    defaults = demo_defaults(9123, tmp_path)
    mine = {
        "LEASEGATE_CONTROL_TOKEN": "my-own-control-secret",
        "LEASEGATE_ADMIN_TOKENS": "me=my-own-admin-secret",
        "LEASEGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}",
    }
    config = load_config(mine, defaults=defaults)
    banner = demo_banner("http://127.0.0.1:8080", 9123, config, defaults["LEASEGATE_DATABASE_URL"])
    assert "my-own-control-secret" not in banner
    assert "my-own-admin-secret" not in banner
    assert "kept between runs" in banner
