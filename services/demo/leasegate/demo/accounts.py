"""The bundled demo accounts file (package data `leasegate/demo/accounts.yaml`), as
`leasegate dev --demo` uses it: every account pointed at the demo upstream's port, and an
account of a cloud kind (`bedrock`, `vertex`, `vertex-gemini`) left out when its extra is not
installed, so the demo starts wherever the gateway does (a pool naming such an account
without its extra refuses to start: leasegate.accounts)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from leasegate.providers import KINDS, OptionError

BUNDLED_UPSTREAM = "http://127.0.0.1:8090"
"""The demo upstream's URL as the bundled file names it."""


def bundled_accounts() -> dict[str, Any]:
    """The bundled file as it is."""
    text = resources.files("leasegate.demo").joinpath("accounts.yaml").read_text("utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def installed(entry: Mapping[object, object]) -> bool:
    """Whether an account's kind can run here: not a cloud kind whose extra is missing (as
    the kind itself says, checking the entry's own fields)."""
    kind = KINDS.get(str(entry.get("provider")))
    if kind is None or kind.cloud_auth is None:
        return True
    try:
        kind.options(entry)
    except OptionError as exc:
        return exc.field_name != "provider"
    return True


def demo_accounts(port: int) -> str:
    """The demo accounts file: the bundled accounts that can run here, pointed at `port`."""
    document = bundled_accounts()
    url = f"http://127.0.0.1:{port}"
    accounts = []
    for entry in document["accounts"]:
        if installed(entry):
            if entry.get("base_url") == BUNDLED_UPSTREAM:
                entry["base_url"] = url
            accounts.append(entry)
    document["accounts"] = accounts
    return yaml.safe_dump(document, sort_keys=False)
