"""Sign-out ends a console session on every control-plane replica (issue 22 item 4): two
`leasegate control-plane` processes sharing Postgres and Redis and one console secret; a
cookie copied before signing out on one is refused by both afterwards."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.fixtures.console import SECRET, opens, sign_in, sign_out
from tests.fixtures.gateways import gateway_env
from tests.fixtures.processes import run_migrate, start_processes
from tests.fixtures.services import production_stores

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


async def test_a_cookie_copied_before_sign_out_is_refused_by_both_replicas(
    tmp_path: Path,
) -> None:
    async with production_stores() as stores:
        env = gateway_env(tmp_path, [], extra={"LEASEGATE_CONSOLE_SECRET": SECRET}, **stores)
        await run_migrate(env)
        with ExitStack() as stack:
            a, b = (p.url for p in await start_processes(stack, env, ["control-plane"] * 2))
            copied = await sign_in(a)
            assert await opens(a, copied)
            assert await opens(b, copied)
            signed_out = await sign_out(a, copied)
            assert signed_out.status_code == 303
            assert await opens(a, copied) is False
            assert await opens(b, copied) is False
