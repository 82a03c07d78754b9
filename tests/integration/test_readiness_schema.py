"""/readyz tells the truth about the schema: both production services against a database that
`leasegate migrate` has not run on (or ran on for an older release) answer 503 and name the
missing migrations, then become ready once it has; embedded mode reports no Redis."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from leasegate.config import load_config
from leasegate.control_plane.app import create_control_plane_app
from leasegate.db.migrate import alembic_config, upgrade
from leasegate.demo.upstream import MockUpstream
from leasegate.proxy.app import create_proxy_app
from tests.fixtures.gateways import (
    CONTROL_TOKEN,
    account_entry,
    gateway_env,
    in_process_gateway,
)
from tests.fixtures.servers import local_client, serve

VERSIONS = Path(__file__).resolve().parents[2] / "libs" / "gateway" / "migrations" / "versions"
EVERY_MIGRATION = sorted(p.stem for p in VERSIONS.glob("0*.py"))


async def _readiness(client: httpx.AsyncClient, urls: list[str]) -> list[tuple[int, str]]:
    answers = [await client.get(f"{url}/readyz") for url in urls]
    return [(a.status_code, a.json()["checks"]["schema"]) for a in answers]


@pytest.mark.postgres
@pytest.mark.redis
async def test_servers_are_unready_until_the_schema_is_at_this_release(
    tmp_path: Path,
    fresh_pg_database: str,
    redis_url: str,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MockUpstream() as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})]
        env = gateway_env(
            tmp_path,
            accounts,
            database_url=fresh_pg_database,
            redis_url=redis_url,
            redis_prefix=redis_prefix,
        )
        config = load_config(env)
        async with (
            serve(create_control_plane_app(config)) as control,
            serve(create_proxy_app(config)) as proxy,
            local_client(timeout=10) as client,
        ):
            every = ", ".join(EVERY_MIGRATION)
            unmigrated = f"unmigrated: missing {every} (run `leasegate migrate`)"
            assert await _readiness(client, [control, proxy]) == [(503, unmigrated)] * 2
            mint = await client.post(
                f"{control}/control/v2/keys",
                json={"tenant": "acme/web", "dispatch_id": "d-1", "model": "gpt-4o"},
                headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
            )
            assert mint.status_code == 503
            logged = {getattr(r, "error", None) for r in caplog.records}
            assert "schema-not-migrated" in logged, logged  # not the driver's class name

            # an older release's migrations: the head is missing
            head, parent = _head_and_parent()
            await asyncio.to_thread(upgrade, fresh_pg_database, parent)
            behind = f"behind: missing {head} (run `leasegate migrate`)"
            assert await _readiness(client, [control, proxy]) == [(503, behind)] * 2

            await asyncio.to_thread(upgrade, fresh_pg_database)
            assert await _readiness(client, [control, proxy]) == [(200, "ok")] * 2


async def test_embedded_mode_reports_no_redis(tmp_path: Path) -> None:
    env = gateway_env(tmp_path, [])
    async with in_process_gateway(env) as gateway:
        ready = await gateway.client.get(f"{gateway.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "schema": "ok"}


def _head_and_parent() -> tuple[str, str]:
    """The head migration's file name and its parent's revision, as Alembic reads them."""
    scripts = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://"))
    (head,) = scripts.get_heads()
    script = scripts.get_revision(head)
    assert script is not None
    (parent,) = script._all_down_revisions
    return Path(script.path).stem, parent
