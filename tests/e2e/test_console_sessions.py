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

import httpx
import pytest

from tests.fixtures.gateways import (
    ADMIN_TOKEN,
    Gateway,
    gateway_env,
    in_process_control_plane,
)
from tests.fixtures.servers import local_client
from tests.fixtures.services import StoresEnv, production_stores

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

SECRET = "a" * 40
OTHER_SECRET = "b" * 40
COOKIE = "leasegate_console"


async def sign_in(url: str, token: str = ADMIN_TOKEN) -> str:
    """A fresh browser signs in on `url`; the session cookie it was given."""
    async with local_client(base_url=url) as browser:
        answer = await browser.post("/console/sign-in", data={"token": token})
        assert answer.status_code == 303, answer.text
        return browser.cookies[COOKIE]


async def opens(url: str, cookie: str) -> bool:
    """Whether the copied cookie opens the console on `url` (a 200, not a 303 to sign-in)."""
    async with local_client(base_url=url) as thief:
        thief.cookies.set(COOKIE, cookie, path="/console")
        answer = await thief.get("/console/audit")
        assert answer.status_code in (200, 303), answer.text
        return answer.status_code == 200


async def sign_out(url: str, cookie: str) -> httpx.Response:
    async with local_client(base_url=url) as browser:
        browser.cookies.set(COOKIE, cookie, path="/console")
        page = await browser.get("/console/actions")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None, page.text
        return await browser.post("/console/sign-out", data={"csrf": csrf.group(1)})


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
