"""Each deployable's own command (`leasegate-proxy`, `leasegate-control-plane`, the console
scripts of the distributions that install alone) refuses what production lacks with one line
and exit 2, before it binds a port."""

from __future__ import annotations

import os

import pytest

from leasegate.control_plane.main import main as control_plane_main
from leasegate.proxy.main import main as proxy_main


@pytest.fixture(autouse=True)
def _no_gateway_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LEASEGATE_"):
            monkeypatch.delenv(name)


def test_the_proxy_command_needs_redis(capsys: pytest.CaptureFixture[str]) -> None:
    assert proxy_main(["--port", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("leasegate-proxy: configuration error: LEASEGATE_REDIS_URL")


def test_the_control_plane_command_needs_its_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEASEGATE_REDIS_URL", "redis://127.0.0.1:6379/0")
    assert control_plane_main(["--port", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "leasegate-control-plane: configuration error: "
        "LEASEGATE_CONTROL_TOKEN: required outside dev mode"
    )


def test_a_bad_setting_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEASEGATE_BASE_COOLDOWN_S", "soon")
    assert proxy_main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("leasegate-proxy: configuration error: ")
