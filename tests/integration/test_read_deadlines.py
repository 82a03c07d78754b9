"""Header and body read deadlines on both services, as real OS processes over raw sockets:
a slowloris client, a silent connection and a body shorter than its Content-Length are
answered 408 (where a response can still be sent) and closed (issue 10, item 9)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import CONTROL_TOKEN, account_entry, gateway_env
from tests.fixtures.processes import PRODUCTION_PROCESSES_MODULE, leasegate_process
from tests.fixtures.servers import local_client
from tests.fixtures.services import production_stores

pytestmark = PRODUCTION_PROCESSES_MODULE

DEADLINE_S = 1.0
BODY_TOTAL_S = 2.0
GIVE_UP_S = 20.0
"""How long a test waits for the server to act: far beyond the deadline, far below what a
slowloris client would keep the connection for without one."""


@contextlib.contextmanager
def _services(env: dict[str, str]) -> Iterator[dict[str, str]]:
    with (
        leasegate_process("control-plane", env) as (control, _),
        leasegate_process("proxy", env) as (proxy, _),
    ):
        yield {"control-plane": control, "proxy": proxy}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def services(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    """Both processes, once for every test here: each test opens connections of its own."""
    async with MockUpstream() as upstream, production_stores() as stores:
        env = gateway_env(
            tmp_path_factory.mktemp("deadlines"),
            [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o"})],
            extra={
                "LEASEGATE_HEADER_READ_TIMEOUT_S": str(DEADLINE_S),
                "LEASEGATE_BODY_IDLE_TIMEOUT_S": str(DEADLINE_S),
                "LEASEGATE_BODY_TOTAL_TIMEOUT_S": str(BODY_TOTAL_S),
            },
            **stores,
        )
        with _services(env) as urls:
            yield urls


async def _open(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), GIVE_UP_S)


async def _trickle(writer: asyncio.StreamWriter, lines: list[bytes], gap_s: float) -> None:
    with contextlib.suppress(ConnectionError):
        for line in lines:
            writer.write(line)
            await writer.drain()
            await asyncio.sleep(gap_s)


@pytest.mark.parametrize("service", ["control-plane", "proxy"])
async def test_slowloris_headers_get_408_and_the_connection_closes(
    services: dict[str, str], service: str
) -> None:
    reader, writer = await _open(services[service])
    path = b"/control/v2/keys" if service == "control-plane" else b"/v1/chat/completions"
    # one header line every 0.4 s, for far longer than the deadline (1 s)
    lines = [b"POST " + path + b" HTTP/1.1\r\n"] + [b"X-Slow-%d: 1\r\n" % i for i in range(100)]
    trickling = asyncio.create_task(_trickle(writer, lines, 0.4))
    try:
        answer = await _read_all(reader)
    finally:
        trickling.cancel()
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request-timeout"
    assert not trickling.done() or trickling.cancelled()  # closed while still trickling


@pytest.mark.parametrize("service", ["control-plane", "proxy"])
async def test_a_silent_connection_is_closed(services: dict[str, str], service: str) -> None:
    reader, writer = await _open(services[service])
    try:
        assert await _read_all(reader) == b""  # closed, nothing to answer
    finally:
        writer.close()


async def _mint(control: str) -> dict[str, Any]:
    """A key of a dispatch of its own (the processes serve every test of the module)."""
    dispatch_id = f"deadlines-{uuid.uuid4().hex[:12]}"
    async with local_client(timeout=10) as client:
        response = await client.post(
            f"{control}/control/v2/keys",
            json={"tenant": "t", "dispatch_id": dispatch_id, "model": "gpt-4o"},
            headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
        )
    assert response.status_code == 201, response.text
    minted: dict[str, Any] = response.json()
    return minted


@pytest.mark.parametrize("service", ["control-plane", "proxy"])
async def test_a_body_shorter_than_its_content_length_gets_408(
    services: dict[str, str], service: str
) -> None:
    minted = await _mint(services["control-plane"])
    if service == "control-plane":
        head = b"POST /control/v2/keys HTTP/1.1\r\nAuthorization: Bearer " + CONTROL_TOKEN.encode()
    else:
        key = minted["key"].encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer " + key
    reader, writer = await _open(services[service])
    try:
        writer.write(
            head + b"\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n" + b'{"model": "gpt-4o"'
        )
        await writer.drain()
        answer = await _read_all(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request-timeout"
    if service == "proxy":
        request_id = _header(answer, b"x-leasegate-request-id")
        row = await _evidence(services["control-plane"], minted["mint_decision_id"])
        assert row["request_id"] == request_id
        assert (row["outcome"], row["refusal_reason"], row["qualifying"]) == (
            "refused",
            "request-timeout",
            False,
        )


@pytest.mark.parametrize("service", ["control-plane", "proxy"])
async def test_a_trickled_body_is_cut_at_the_total_deadline(
    services: dict[str, str], service: str
) -> None:
    """One byte every 0.3 s never lets the idle deadline (1 s) expire; the total one (2 s)
    answers 408 with the envelope and closes the connection, while the client still sends."""
    minted = await _mint(services["control-plane"])
    if service == "control-plane":
        head = b"POST /control/v2/keys HTTP/1.1\r\nAuthorization: Bearer " + CONTROL_TOKEN.encode()
    else:
        head = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer "
        head += minted["key"].encode()
    reader, writer = await _open(services[service])
    writer.write(
        head + b"\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    trickling = asyncio.create_task(_trickle(writer, [b" "] * 1000, 0.3))
    started = asyncio.get_running_loop().time()
    try:
        answer = await _read_all(reader)
    finally:
        trickling.cancel()
        writer.close()
    took = asyncio.get_running_loop().time() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert BODY_TOTAL_S - 0.1 <= took < BODY_TOTAL_S + 5, took
    assert _header(answer, b"connection") == "close"
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == "request-timeout"
    assert f"{BODY_TOTAL_S:g} s" in error["message"]
    if service == "proxy":
        row = await _evidence(services["control-plane"], minted["mint_decision_id"])
        assert row["request_id"] == _header(answer, b"x-leasegate-request-id")
        assert (row["outcome"], row["refusal_reason"]) == ("refused", "request-timeout")


async def test_a_normal_request_is_unaffected(services: dict[str, str]) -> None:
    minted = await _mint(services["control-plane"])
    async with local_client(timeout=10) as client:
        response = await client.post(
            f"{services['proxy']}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": []},
            headers={"Authorization": f"Bearer {minted['key']}"},
        )
    assert response.status_code == 200


def _header(answer: bytes, name: bytes) -> str:
    head = answer.split(b"\r\n\r\n", 1)[0]
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    raise AssertionError(f"no {name!r} header")


async def _evidence(control: str, decision_id: str) -> dict[str, Any]:
    async with local_client(timeout=10) as client:
        for _ in range(200):
            response = await client.get(
                f"{control}/control/v2/evidence",
                params={"decision_id": decision_id},
                headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
            )
            rows = response.json()["evidence"]
            if rows:
                row: dict[str, Any] = rows[0]
                return row
            await asyncio.sleep(0.05)
    raise AssertionError("no evidence row")


@pytest.mark.parametrize("service", ["control-plane", "proxy"])
async def test_an_endless_header_block_is_431(services: dict[str, str], service: str) -> None:
    reader, writer = await _open(services[service])
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        with contextlib.suppress(ConnectionError):
            for i in range(200):  # 200 x 1 KiB, far past the 64 KiB cap, never finished
                writer.write(b"X-Pad-%d: " % i + b"p" * 1000 + b"\r\n")
                await writer.drain()
        answer = await _read_all(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request-header-too-large"


async def test_keep_alive_requests_with_bodies_still_work(services: dict[str, str]) -> None:
    """Many requests on one connection, bodies larger than the header cap included."""
    async with local_client(timeout=10) as client:
        for _ in range(5):
            response = await client.post(
                f"{services['control-plane']}/control/v2/keys",
                content=b'{"tenant": "t", "pad": "' + b"p" * 100_000 + b'"}',
                headers={
                    "Authorization": f"Bearer {CONTROL_TOKEN}",
                    "Content-Type": "application/json",
                },
            )
            assert response.status_code == 400  # unknown field: the body was read whole
