"""Each shipped deploy flavour runs as its file says: every Leasegate service of
`deploy/compose.yaml` and of the rendered `deploy/kubernetes` kustomization is started as real
processes with exactly the environment the file gives its container (tests/fixtures/
deploy_files.py: placeholders for secrets, hosts and mounts mapped to this machine), and the
gateway is used through them: a mint, a call, a tenant budget refused by every proxy, a console
sign-in valid on both control planes, and a revocation that reaches both proxies.

The schema check (`test_deploy_files.py`) passed files on which budgets were off (a proxy
without the audit key) and the console bounced to sign-in (two control planes without one
console secret); this runs them."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from leasegate.config import load_config
from leasegate.demo.upstream import MockUpstream
from tests.fixtures.databases import create_database, drop_database, pg_url
from tests.fixtures.deploy_files import (
    LocalWorld,
    Service,
    check_server,
    compose_services,
    first_model,
    kubernetes_services,
)
from tests.fixtures.gateway_client import GatewayClient
from tests.fixtures.processes import leasegate_process, run_migrate
from tests.fixtures.servers import local_client
from tests.fixtures.services import REDIS_URL, delete_prefix, require_postgres, require_redis

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SETTLE_S = 5.0
"""Budget refusals and revocations reach every proxy within a second; polled up to this."""

FLAVOURS: dict[str, tuple[Callable[[LocalWorld], dict[str, Service]], str, str, str]] = {
    # reader, then the names of its migrate, control-plane and proxy services
    "compose": (compose_services, "migrate", "control-plane", "proxy"),
    "kubernetes": (
        kubernetes_services,
        "leasegate-migrate",
        "leasegate-control-plane",
        "leasegate-proxy",
    ),
}


@dataclass
class Running:
    gateway: GatewayClient
    controls: list[str]
    proxies: list[str]
    admin_token: str


@asynccontextmanager
async def deployed(flavour: str, tmp_path: Path) -> AsyncIterator[Running]:
    require_postgres()
    require_redis()
    read, migrate, control, proxy = FLAVOURS[flavour]
    prefix = f"lgtest:{secrets.token_hex(4)}"
    async with AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(MockUpstream())
        database = await create_database()
        stack.push_async_callback(drop_database, database)
        stack.push_async_callback(delete_prefix, prefix)
        world = LocalWorld(pg_url(database), REDIS_URL, upstream.url, prefix, tmp_path)
        services = read(world)
        assert {migrate, control, proxy} <= set(services), sorted(services)
        await run_migrate(services[migrate].env)
        for name in (control, proxy):
            # what `leasegate` checks before it serves, with the file's own --workers
            service = services[name]
            check_server(service.command, service.workers, load_config(service.env).settings)
        processes = stack.enter_context(ExitStack())
        started = await asyncio.gather(
            *(
                asyncio.to_thread(
                    processes.enter_context,
                    leasegate_process(
                        services[name].command,
                        services[name].env,
                        args=services[name].local_args(),
                        log_path=tmp_path / f"{name}-{index}.log",
                    ),
                )
                for name in (control, proxy)
                for index in range(min(2, services[name].processes))
            )
        )
        controls = [p.url for p in started[: min(2, services[control].processes)]]
        proxies = [p.url for p in started[len(controls) :]]
        assert (len(controls), len(proxies)) == (2, 2), "each file runs two of each"
        env = services[control].env
        client = await stack.enter_async_context(local_client(timeout=30))
        model = first_model(env["LEASEGATE_ACCOUNTS_FILE"])
        gateway = GatewayClient(
            control_url=controls[0],
            proxy_url=proxies[0],
            client=client,
            control_token=env["LEASEGATE_CONTROL_TOKEN"],
            tenant=f"deploy/{secrets.token_hex(3)}",
            model=model,
        )
        admin_token = env["LEASEGATE_ADMIN_TOKENS"].split(",")[0].split("=", 1)[1]
        yield Running(gateway, controls, proxies, admin_token)


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
async def test_the_deploy_file_runs_as_shipped(flavour: str, tmp_path: Path) -> None:
    async with deployed(flavour, tmp_path) as site:
        gw, admin = site.gateway, {"Authorization": f"Bearer {site.admin_token}"}

        # a tenant budget, signed into the audit chain on one control plane
        revision = (await gw.control_get("/accounts"))["revision"]
        budget = {"expected_revision": revision, "period": "day", "max_tokens": 1}
        answer = await gw.client.post(
            f"{site.controls[1]}/control/v2/tenants/{gw.tenant}/budget",
            json={"reason": "deploy test", **budget},
            headers=admin,
        )
        assert answer.status_code == 200, answer.text

        # a mint and a call (the tenant has spent nothing yet), then every proxy refuses
        spender = await gw.minted(dispatch_id="d-spend")
        assert (await gw.chat(spender)).status_code == 200

        async def every_proxy_refuses() -> bool:
            refusals = []
            for proxy in site.proxies:
                answer = await gw.at(proxy_url=proxy).chat(spender)
                refusals.append((answer.status_code, answer.json().get("error", {}).get("code")))
            return refusals == [(402, "tenant-budget-exhausted")] * len(site.proxies)

        await until(every_proxy_refuses, "a proxy served a tenant past its budget")

        # a console sign-in on one control plane is valid on the other
        first, second = site.controls
        for signed, other in ((first, second), (second, first)):
            async with local_client(timeout=30) as browser:  # its cookies ignore the port
                sign_in = await browser.post(
                    f"{signed}/console/sign-in", data={"token": site.admin_token}
                )
                assert sign_in.status_code == 303, sign_in.text
                page = await browser.get(f"{other}/console/pool")
            assert page.status_code == 200, f"{other} answered {page.status_code}: sign in again"

        # a revocation on one control plane reaches both proxies
        key = await gw.at(control_url=second).minted(
            tenant=f"{gw.tenant}-free", dispatch_id="d-revoke"
        )
        for proxy in site.proxies:
            assert (await gw.at(proxy_url=proxy).chat(key)).status_code == 200
        assert (await gw.revoke(key["key_id"])).status_code == 204

        async def every_proxy_refuses_the_key() -> bool:
            answers = [await gw.at(proxy_url=p).chat(key) for p in site.proxies]
            return [a.status_code for a in answers] == [401] * len(answers)

        await until(every_proxy_refuses_the_key, "a proxy served a revoked key")
