"""The production proxy's own app (`create_proxy_app`: Starlette, no FastAPI) answers as the
embedded gateway does: the error envelope for unknown routes, wrong methods (with `Allow`),
oversized bodies, failed stores and unexpected errors (no detail leaked); `/healthz`,
`/readyz`, `/metrics` and `/v1/models`; and proxied calls. Postgres and Redis, the control
plane and the proxy each on its own port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from leasegate.config import load_config
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.demo.upstream import MockUpstream
from leasegate.proxy.app import create_proxy_app
from tests.fixtures.gateways import (
    Gateway,
    account_entry,
    gateway_env,
    in_process_split_gateway,
)
from tests.fixtures.servers import local_client, serve
from tests.fixtures.services import production_stores

BODY_LIMIT = 4096


@pytest.fixture
async def split(tmp_path: Path) -> AsyncIterator[tuple[Gateway, str]]:
    async with production_stores() as stores, MockUpstream() as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o-2024-08-06"})]
        extra = {"LEASEGATE_MAX_BODY_BYTES": str(BODY_LIMIT)}
        env = gateway_env(tmp_path, accounts, extra=extra, **stores)
        async with in_process_split_gateway(env, [upstream]) as running:
            yield running


def _code(body: dict[str, object]) -> object:
    error = body["error"]
    assert isinstance(error, dict)
    return error["code"]


async def test_refusals_are_envelopes_with_their_headers(split: tuple[Gateway, str]) -> None:
    gw, proxy = split
    missing = await gw.client.get(f"{proxy}/nowhere")
    assert (missing.status_code, _code(missing.json())) == (404, "not-found")
    wrong = await gw.client.get(f"{proxy}/v1/chat/completions")
    assert (wrong.status_code, _code(wrong.json())) == (405, "method-not-allowed")
    assert wrong.headers["allow"] == "POST"
    probe = await gw.client.post(f"{proxy}/healthz")
    assert (probe.status_code, _code(probe.json())) == (405, "method-not-allowed")
    assert "GET" in probe.headers["allow"]
    slash = await gw.client.get(f"{proxy}/healthz/")
    assert slash.status_code == 404  # no redirect to /healthz


async def test_an_oversized_body_is_413_and_a_proxied_call_goes_through(
    split: tuple[Gateway, str],
) -> None:
    gw, proxy = split
    key = (await gw.minted())["key"]
    auth = {"Authorization": f"Bearer {key}"}
    big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * BODY_LIMIT}]}
    refused = await gw.client.post(f"{proxy}/v1/chat/completions", json=big, headers=auth)
    assert refused.status_code == 413
    assert _code(refused.json()) == "invalid-request"
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    answered = await gw.client.post(f"{proxy}/v1/chat/completions", json=small, headers=auth)
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-leasegate-account"] == "openai-main"
    models = await gw.client.get(f"{proxy}/v1/models", headers=auth)
    assert models.status_code == 200
    assert "gpt-4o" in [m["id"] for m in models.json()["data"]]


async def test_ops_routes(split: tuple[Gateway, str]) -> None:
    gw, proxy = split
    assert (await gw.client.get(f"{proxy}/healthz")).json() == {"status": "ok"}
    ready = await gw.client.get(f"{proxy}/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "schema": "ok", "redis": "ok"}
    metrics = await gw.client.get(f"{proxy}/metrics")
    assert metrics.status_code == 200
    assert "leasegate_" in metrics.text
    assert metrics.headers["content-type"].startswith("text/plain")


async def test_a_failed_store_is_503_and_an_unexpected_error_is_500_without_detail(
    tmp_path: Path,
) -> None:
    async with production_stores() as stores, MockUpstream() as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})]
        config = load_config(gateway_env(tmp_path, accounts, **stores))
        plane = create_proxy_app(config)
        app = plane.rest
        assert isinstance(app, Starlette)

        async def store_down(_: Request) -> Response:
            raise StoreUnavailable("ConnectionRefusedError")

        async def broken(_: Request) -> Response:
            raise RuntimeError("a secret detail")

        app.router.routes += [Route("/store-down", store_down), Route("/broken", broken)]
        async with serve(plane) as url:
            async with local_client(timeout=10) as client:
                down = await client.get(f"{url}/store-down")
                assert (down.status_code, _code(down.json())) == (503, "unavailable")
                assert down.headers["retry-after"] == "1"
                failed = await client.get(f"{url}/broken")
                assert (failed.status_code, _code(failed.json())) == (500, "internal")
                assert "secret" not in failed.text
