"""A qualifying failure's row is durable before the worker sees the failure: the hop that
cites it is granted at once, never held for the evidence writer's buffer. The buffer's flush
interval is set far longer than the test, so only the immediate write can explain a grant.
Both modes: embedded (SQLite) and production (Postgres + Redis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from leasegate.demo.upstream import MockRequest, MockUpstream, Reply
from tests.fixtures.gateways import Gateway, account_entry, gateway_env, in_process_gateway
from tests.fixtures.services import StoresEnv

ROUNDS = 20

# every way a request can fail qualifyingly and visibly: an error status, an error event in a
# 200 stream, a stream the upstream cut, a stream that stalled (the gateway appends an event)
FAILURES: list[tuple[Reply, bool]] = [
    (Reply(status=429), False),
    (Reply(error_after=1), True),
    (Reply(cut_after=1), True),
    (Reply(status=503), False),
]


async def _call(gw: Gateway, key: str, stream: bool) -> httpx.Response:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    response = await gw.client.post(
        f"{gw.url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    )
    await response.aread()
    return response


async def test_the_hop_citing_a_failure_is_granted_at_once_every_time(
    tmp_path: Path, stores_env: StoresEnv
) -> None:
    current: list[Reply] = [FAILURES[0][0]]

    def script(_: MockRequest) -> Reply:
        return current[0]

    async with MockUpstream(script, chunks=4) as primary, MockUpstream(chunks=4) as backup:
        env = gateway_env(
            tmp_path,
            [
                account_entry("primary", primary, {"gpt-4o": "gpt-4o-a"}),
                account_entry("backup", backup, {"gpt-4o": "gpt-4o-b"}),
            ],
            **stores_env,
            extra={
                "LEASEGATE_EVIDENCE_FLUSH_INTERVAL_S": "60",  # the buffer never helps here
                "LEASEGATE_FAILURE_THRESHOLD": "1000",  # the primary never cools
                "LEASEGATE_ACCOUNT_FAILURE_THRESHOLD": "1000",
            },
        )
        async with in_process_gateway(env, [primary, backup]) as gw:
            for i in range(ROUNDS):
                reply, stream = FAILURES[i % len(FAILURES)]
                current[0] = reply
                first = await gw.minted(dispatch_id=f"d-{i}")
                assert first["account_id"] == "primary"
                failed = await _call(gw, first["key"], stream)
                if not stream:
                    assert failed.status_code == reply.status

                revoked = await gw.revoke(first["key_id"])
                assert revoked.status_code == 204
                hop = await gw.mint(
                    dispatch_id=f"d-{i}", retry_of_mint_decision_id=first["mint_decision_id"]
                )
                assert hop.status_code == 201, (i, hop.status_code, hop.text)
                assert "retry-after" not in hop.headers
                assert hop.json()["account_id"] == "backup"
