"""One contract for the console's open sessions (`leasegate.core.ports.sessions`), run against
the in-process twin, a single Redis and a three-master Redis Cluster."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

import pytest

from leasegate.core.ports.sessions import ConsoleSessions
from leasegate.kv.sessions_memory import InProcessConsoleSessions
from leasegate.kv.sessions_redis import RedisConsoleSessions
from tests.fixtures.redis_cluster import connect, delete_prefix_keys

# Times are taken when each test starts: Redis expires the set by its own clock, so a session
# of the past (a time read when the module was collected, minutes earlier under xdist) would
# already be gone.

REDIS_KINDS = [
    pytest.param("redis_url", id="redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster_url", id="redis-cluster", marks=pytest.mark.redis),
]


@pytest.fixture(params=["memory", *REDIS_KINDS])
async def sessions(request: pytest.FixtureRequest) -> AsyncIterator[ConsoleSessions]:
    if request.param == "memory":
        yield InProcessConsoleSessions()
        return
    client = connect(request.getfixturevalue(request.param))
    prefix = f"lgtest:{secrets.token_hex(4)}"
    try:
        yield RedisConsoleSessions(client, prefix)
    finally:
        await delete_prefix_keys(client, prefix)
        await client.aclose()


async def test_a_session_is_open_from_sign_in_until_it_is_closed(
    sessions: ConsoleSessions,
) -> None:
    t0 = float(int(time.time()))
    assert not await sessions.is_open("cred-a", "s1", t0)
    await sessions.open("cred-a", "s1", t0 + 60, t0)
    assert await sessions.is_open("cred-a", "s1", t0 + 59.5)
    assert not await sessions.is_open("cred-b", "s1", t0)  # the credential is part of the name
    await sessions.close("cred-a", "s1")
    await sessions.close("cred-a", "s1")  # idempotent
    assert not await sessions.is_open("cred-a", "s1", t0)


async def test_a_session_is_closed_by_its_expiry(sessions: ConsoleSessions) -> None:
    t0 = float(int(time.time()))
    await sessions.open("cred-a", "s1", t0 + 60, t0)
    assert not await sessions.is_open("cred-a", "s1", t0 + 60)


async def test_retire_closes_the_sessions_of_credentials_not_kept(
    sessions: ConsoleSessions,
) -> None:
    t0 = float(int(time.time()))
    await sessions.open("cred-a", "s1", t0 + 60, t0)
    await sessions.open("cred-a", "s2", t0 + 60, t0)
    await sessions.open("cred-b", "s3", t0 + 60, t0)
    await sessions.open("cred-c", "s4", t0 + 5, t0)  # expired by the time of the retire
    assert await sessions.retire({"cred-b"}, t0 + 10) == 2
    assert not await sessions.is_open("cred-a", "s1", t0 + 10)
    assert not await sessions.is_open("cred-a", "s2", t0 + 10)
    assert await sessions.is_open("cred-b", "s3", t0 + 10)
    assert await sessions.retire({"cred-b"}, t0 + 10) == 0
