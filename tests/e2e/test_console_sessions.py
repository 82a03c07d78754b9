"""Console sessions end server-side (issue 22 item 4): a cookie copied before sign-out, before
its token was removed or changed, or before the console secret changed, no longer opens the
console on any control plane sharing the stores. Fast: control planes served in this process
against real Postgres and Redis (the two-process test is in
tests/integration/test_console_sign_out_replicas.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.fixtures.console import COOKIE, OTHER_SECRET, SECRET, opens, sign_in, sign_out
from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    Gateway,
    gateway_env,
    in_process_control_plane,
)
from tests.fixtures.relay import tcp_relay
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv, production_stores

REDIS_PORT = 6379

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
async def stores() -> AsyncIterator[StoresEnv]:
    async with production_stores() as env:
        yield env


@asynccontextmanager
async def control_plane(
    tmp_path: Path, stores: StoresEnv, *, admins: str | None = None, secret: str = SECRET
) -> AsyncIterator[str]:
    extra = {"LEASEGATE_CONSOLE_SECRET": secret}
    if admins is not None:
        extra["LEASEGATE_ADMIN_TOKENS"] = admins
    async with in_process_control_plane(gateway_env(tmp_path, [], extra=extra, **stores)) as url:
        yield url


async def test_a_cookie_copied_before_sign_out_opens_nothing(
    tmp_path: Path, stores: StoresEnv
) -> None:
    async with control_plane(tmp_path, stores) as a, control_plane(tmp_path, stores) as b:
        cookie = await sign_in(a)
        assert await opens(a, cookie)
        assert await opens(b, cookie)  # one secret, one session for both replicas
        assert (await sign_out(a, cookie)).status_code == 303
        assert not await opens(a, cookie)
        assert not await opens(b, cookie)
        assert await opens(b, await sign_in(b))  # a new sign-in is unaffected


async def test_removing_a_token_ends_its_sessions_on_every_replica(
    tmp_path: Path, stores: StoresEnv
) -> None:
    async with control_plane(tmp_path, stores) as old:
        cookie = await sign_in(old)
        reader = await sign_in(old, "test-control-token")
        # A replica starts with ops-alice removed: the old one, still configured with her
        # token, refuses her session too; the control token's session lives on.
        async with control_plane(tmp_path, stores, admins="ops-bob=" + "b" * 20) as new:
            assert not await opens(new, cookie)
            assert not await opens(old, cookie)
            assert await opens(new, reader)
        # Putting the token back does not bring the session back.
        async with control_plane(tmp_path, stores) as restored:
            assert not await opens(restored, cookie)
            assert await opens(restored, await sign_in(restored))


async def test_a_changed_token_or_secret_ends_the_old_sessions_everywhere(
    tmp_path: Path, stores: StoresEnv
) -> None:
    async with control_plane(tmp_path, stores) as old:
        cookie = await sign_in(old)
        async with control_plane(tmp_path, stores, admins="ops-alice=" + "n" * 20) as new:
            assert not await opens(new, cookie)
            assert not await opens(old, cookie)  # the old token, same name: refused too
        cookie = await sign_in(old)
        async with control_plane(tmp_path, stores, secret=OTHER_SECRET) as new:
            assert not await opens(new, cookie)
            assert not await opens(old, cookie)
            assert await opens(new, await sign_in(new))


async def test_sign_out_ends_the_session_in_either_mode(gateway: Gateway) -> None:
    cookie = await sign_in(gateway.url)
    assert await opens(gateway.url, cookie)
    assert (await sign_out(gateway.url, cookie)).status_code == 303
    assert not await opens(gateway.url, cookie)


async def test_without_the_session_store_nothing_acts_and_reads_go_on(
    tmp_path: Path, stores: StoresEnv
) -> None:
    """Redis refusing connections: signing in, signing out and acting are 503 and change
    nothing; a signed-in operator can still read pages. Redis back: sign-out works."""
    async with tcp_relay("127.0.0.1", REDIS_PORT) as relay:
        cut: StoresEnv = {**stores, "redis_url": f"redis://127.0.0.1:{relay.port}/0"}
        async with control_plane(tmp_path, cut) as url:
            cookie = await sign_in(url)
            async with local_client(base_url=url) as browser:
                browser.cookies.set(COOKIE, cookie, path="/console")
                page = await browser.get("/console/actions")
                csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
                assert csrf is not None
                relay.mode = "refuse"
                assert (await browser.get("/console/audit")).status_code == 200
                for path, form in (
                    ("/console/sign-out", {"csrf": csrf.group(1)}),
                    ("/console/actions", {"csrf": csrf.group(1), "account": "x"}),
                    ("/console/sign-in", {"token": ADMIN_TOKEN}),
                ):
                    refused = await browser.post(path, data=form)
                    assert refused.status_code == 503, (path, refused.text)
                    assert "Sessions unavailable" in refused.text
                    assert int(refused.headers["retry-after"]) >= 1
                    assert "set-cookie" not in refused.headers
                relay.mode = "pass"
            assert (await sign_out(url, cookie)).status_code == 303
            assert not await opens(url, cookie)
