"""`leasegate accounts …` and `leasegate audit verify` against a running gateway."""

from __future__ import annotations

import asyncio

import pytest

from leasegate.cli.main import main
from tests.e2e.test_admin_overlay import _delete_record
from tests.fixtures.gateways import ADMIN_TOKEN, CONTROL_TOKEN, Gateway


async def leasegate(*argv: str) -> int:
    # the CLI is synchronous; the gateway serves from this test's event loop
    return await asyncio.to_thread(main, list(argv))


@pytest.mark.parametrize("mode", ["embedded"])
async def test_operator_cli(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEASEGATE_ADMIN_TOKEN", ADMIN_TOKEN)
    url = ("--url", gateway.url)

    assert await leasegate("audit", "verify", *url) == 3  # no records yet: nothing verified
    assert await leasegate("accounts", "drain", "claude-main", "--reason", "migrating", *url) == 0
    assert "claude-main: draining at revision 1" in capsys.readouterr().out
    assert await leasegate("accounts", "disable", "openai-main", "--reason", "leak", *url) == 0
    assert "openai-main: disabled at revision 2 (0 keys revoked)" in capsys.readouterr().out
    assert await leasegate("accounts", "list", *url) == 0
    listing = capsys.readouterr().out
    assert "revision 2  chain ok" in listing
    assert [line.split()[:2] for line in listing.splitlines()[2:]] == [
        ["openai-main", "disabled"],
        ["claude-main", "draining"],
    ]
    assert await leasegate("audit", "verify", *url) == 0

    control = ("--url", gateway.url, "--token", CONTROL_TOKEN)
    assert await leasegate("accounts", "enable", "openai-main", "--reason", "x", *control) == 1
    assert "403 forbidden" in capsys.readouterr().err

    await _delete_record(gateway.env["LEASEGATE_DATABASE_URL"], seq=1)
    assert await leasegate("audit", "verify", *url) == 1
    assert "chain corrupt" in capsys.readouterr().out
    assert await leasegate("accounts", "enable", "openai-main", "--reason", "x", *url) == 1
    assert "audit-chain-corrupt" in capsys.readouterr().err

    monkeypatch.delenv("LEASEGATE_ADMIN_TOKEN")
    assert await leasegate("accounts", "list", *url) == 2


@pytest.mark.parametrize("mode", ["embedded"])
async def test_a_change_its_body_refuses_is_never_sent(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget without a bound fails the request body's own checks: the CLI says why, with
    nothing sent, and the chain still has no record."""
    monkeypatch.setenv("LEASEGATE_ADMIN_TOKEN", ADMIN_TOKEN)
    url = ("--url", gateway.url)

    budget = ("tenants", "budget", "acme/web", "--period", "day", "--reason", "x", *url)
    assert await leasegate(*budget) == 1
    err = capsys.readouterr().err
    assert err == (
        "leasegate: invalid-request (not sent): "
        "a budget needs a period and max_tokens, max_cost or both\n"
    )
    assert await leasegate("audit", "verify", *url) == 3  # no record: nothing was changed
    assert "chain absent  revision 0" in capsys.readouterr().out
