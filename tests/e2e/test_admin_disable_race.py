"""A disable racing a burst of mints leaves no live key on the disabled account: every mint
either committed before the disable (and was revoked by it) or decided again after it."""

from __future__ import annotations

import asyncio

from tests.e2e.test_admin_overlay import set_state
from tests.fixtures.gateways import Gateway


async def test_no_key_outlives_a_concurrent_disable(gateway: Gateway) -> None:
    async def mint(i: int) -> int:
        await asyncio.sleep(0.002 * (i % 10))
        return (await gateway.mint(dispatch_id=f"race-{i}")).status_code

    mints = [asyncio.create_task(mint(i)) for i in range(40)]
    await asyncio.sleep(0.01)
    disabled = await set_state(gateway, "disabled", 0)
    statuses = await asyncio.gather(*mints)

    assert disabled.status_code == 200, disabled.text
    assert set(statuses) <= {201, 503}, statuses
    account = await gateway.control_get("/accounts/openai-main")
    assert account["admin_state"] == "disabled"
    assert account["leases_held"] == 0
