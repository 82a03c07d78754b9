"""Access logs and start-up warnings, read from real processes' stderr: one JSON line per
request on both services, never a key, credential or prompt; a setting turns them off. An
account whose credential variable is unset is named at start-up and in /readyz."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import leasegate_process, run_migrate
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = pytest.mark.slow

PROMPT = "a-prompt-nobody-may-log"


def _lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def _access(path: Path) -> list[dict[str, Any]]:
    return [r for r in _lines(path) if r.get("logger") == "leasegate.access"]


@pytest.mark.postgres
@pytest.mark.redis
async def test_both_services_log_one_line_per_request(tmp_path: Path) -> None:
    control_log, proxy_log = tmp_path / "control.log", tmp_path / "proxy.log"
    async with production_stores() as stores, MockUpstream() as upstream:
        env = gateway_env(
            tmp_path,
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            database_url=stores["database_url"],
            redis_url=stores["redis_url"],
            redis_prefix=stores["redis_prefix"],
        )
        await run_migrate(env)
        with (
            control_log.open("wb") as clog,
            proxy_log.open("wb") as plog,
            leasegate_process("control-plane", env, log=clog) as (control_url, _),
            leasegate_process("proxy", env, log=plog) as (proxy_url, _),
        ):
            async with local_client(timeout=10) as client:
                mint = await client.post(
                    f"{control_url}/control/v2/keys",
                    json={"tenant": "acme/web", "dispatch_id": "d-1", "model": "gpt-4o"},
                    headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
                )
                minted = mint.json()
                chat = await client.post(
                    f"{proxy_url}/v1/chat/completions",
                    json={"model": "gpt-4o", "messages": [{"role": "user", "content": PROMPT}]},
                    headers={"Authorization": f"Bearer {minted['key']}"},
                )
                assert chat.status_code == 200
        # the processes have stopped: every line is written
        (mint_line,) = [r for r in _access(control_log) if r["path"] == "/control/v2/keys"]
        assert mint_line["method"] == "POST"
        assert mint_line["status"] == 201
        assert mint_line["duration_ms"] >= 0
        assert mint_line["request_id"] == mint.headers["x-leasegate-request-id"]
        (chat_line,) = [r for r in _access(proxy_log) if r["path"] == "/v1/chat/completions"]
        assert chat_line["status"] == 200
        assert chat_line["request_id"] == chat.headers["x-leasegate-request-id"]
        assert chat_line["key_id"] == minted["key_id"]
        assert chat_line["account"] == "openai-main"
        everything = control_log.read_text() + proxy_log.read_text()
        for secret in (minted["key"], minted["key"].rsplit("_", 1)[1], PROMPT, CONTROL_TOKEN):
            assert secret not in everything
        assert "sk-secret-openai-main" not in everything  # the account's credential


async def test_access_log_off_and_an_unset_credential_named(tmp_path: Path) -> None:
    log_path = tmp_path / "dev.log"
    async with MockUpstream() as upstream:
        accounts = [
            account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"}),
            account_entry("openai-spare", upstream, {"gpt-4o": "gpt-4o"}),
        ]
        env = gateway_env(tmp_path, accounts, extra={"LEASEGATE_ACCESS_LOG": "false"})
        del env["LEASEGATE_CRED_OPENAI_SPARE"]
        with log_path.open("wb") as log, leasegate_process("dev", env, log=log) as (url, _):
            async with local_client(timeout=10) as client:
                ready = (await client.get(f"{url}/readyz")).json()
    assert ready["status"] == "ready"  # the other account serves
    assert ready["unconfigured_accounts"] == [
        {"account": "openai-spare", "variable": "LEASEGATE_CRED_OPENAI_SPARE"}
    ]
    records = _lines(log_path)
    assert _access(log_path) == []
    (warning,) = [r for r in records if r.get("account") == "openai-spare"]
    assert warning["level"] == "warning"
    assert warning["variable"] == "LEASEGATE_CRED_OPENAI_SPARE"
