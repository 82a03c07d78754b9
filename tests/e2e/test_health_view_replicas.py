"""Two `leasegate proxy` OS processes: a cooldown opened through one is refused by the other
within 100 ms, though neither asks Redis before a request on a healthy pair."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.deployments import deployment
from tests.fixtures.gateways import account_entry

SETTINGS = {
    "LEASEGATE_FAILURE_THRESHOLD": "1",
    "LEASEGATE_ACCOUNT_FAILURE_THRESHOLD": "1",
    "LEASEGATE_BASE_COOLDOWN_S": "30",
    "LEASEGATE_MAX_COOLDOWN_S": "600",
}


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.postgres
@pytest.mark.redis
async def test_a_cooldown_opened_through_one_proxy_is_refused_by_the_other(
    tmp_path: Path,
) -> None:
    failing = False

    def script(request: MockRequest) -> Reply | None:
        return Reply(status=503) if failing else None

    async with MockUpstream(script) as upstream:
        accounts = [account_entry("hv-acct", upstream, {"hv-model": "hv-model"})]
        async with deployment("replicas", tmp_path, accounts, SETTINGS) as d:
            key = await d.minted(model="hv-model", dispatch_id="hv-1")
            for via in (0, 1):  # both proxies know the key and find the pair healthy
                assert (await d.via(via).chat(key)).status_code == 200
            failing = True
            assert (await d.via(0).chat(key)).status_code == 503  # the upstream's own 503
            failing = False
            before = upstream.count
            await asyncio.sleep(0.1)
            refused = await d.via(1).chat(key)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "model-cooling"
            assert upstream.count == before, "the other proxy did not call the upstream"
