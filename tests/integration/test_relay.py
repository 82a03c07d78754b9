"""The fault-injection relay itself: each mode does to a real TCP peer what it promises."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tests.fixtures.relay import TcpRelay, tcp_relay, threaded_tcp_relay
from tests.fixtures.services import REDIS_URL

QUIET_S = 0.3
"""How long a blackholed peer is watched for bytes that must not arrive."""


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """A TCP echo server on a free loopback port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def connect(relay: TcpRelay) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(relay.host, relay.port)


async def roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), timeout=5)


async def test_pass_forwards_both_ways(echo: int) -> None:
    async with tcp_relay("127.0.0.1", echo) as relay:
        reader, writer = await connect(relay)
        assert await roundtrip(reader, writer, b"hello") == b"hello"
        big = bytes(range(256)) * 1024
        assert await roundtrip(reader, writer, big) == big
        writer.close()


async def test_blackhole_holds_bytes_and_pass_delivers_them(echo: int) -> None:
    async with tcp_relay("127.0.0.1", echo) as relay:
        old_reader, old_writer = await connect(relay)
        assert await roundtrip(old_reader, old_writer, b"before") == b"before"

        relay.mode = "blackhole"
        old_writer.write(b"held")
        new_reader, new_writer = await connect(relay)  # accepted: the partition is silent
        new_writer.write(b"queued")
        for reader in (old_reader, new_reader):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(reader.read(1), timeout=QUIET_S)
        assert relay.connections == 2

        relay.mode = "pass"
        assert await asyncio.wait_for(old_reader.readexactly(4), timeout=5) == b"held"
        assert await asyncio.wait_for(new_reader.readexactly(6), timeout=5) == b"queued"
        old_writer.close()
        new_writer.close()


async def test_freeze_silences_the_open_connections_only(echo: int) -> None:
    async with tcp_relay("127.0.0.1", echo) as relay:
        old_reader, old_writer = await connect(relay)
        assert await roundtrip(old_reader, old_writer, b"before") == b"before"

        relay.mode = "freeze"
        old_writer.write(b"held")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(old_reader.read(1), timeout=QUIET_S)
        new_reader, new_writer = await connect(relay)
        assert await roundtrip(new_reader, new_writer, b"new") == b"new"
        assert relay.connections == 2  # the frozen one is still open

        relay.mode = "pass"
        assert await asyncio.wait_for(old_reader.readexactly(4), timeout=5) == b"held"
        old_writer.close()
        new_writer.close()


async def test_refuse_closes_open_and_new_connections(echo: int) -> None:
    async with tcp_relay("127.0.0.1", echo) as relay:
        reader, writer = await connect(relay)
        assert await roundtrip(reader, writer, b"x") == b"x"

        relay.mode = "refuse"
        assert await closed_by_peer(reader)
        writer.close()
        new_reader, new_writer = await connect(relay)
        assert await closed_by_peer(new_reader)
        new_writer.close()

        relay.mode = "pass"
        reader, writer = await connect(relay)
        assert await roundtrip(reader, writer, b"back") == b"back"
        writer.close()


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), timeout=5) == b""
    except ConnectionResetError:
        return True


def test_threaded_relay_serves_a_blocking_caller(echo_port_sync: int) -> None:
    with threaded_tcp_relay("127.0.0.1", echo_port_sync) as relay:
        with socket.create_connection((relay.host, relay.port), timeout=5) as sock:
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"
            relay.mode = "blackhole"
            sock.sendall(b"late")
            sock.settimeout(QUIET_S)
            with pytest.raises(TimeoutError):
                sock.recv(4)
            relay.mode = "pass"
            sock.settimeout(5)
            assert sock.recv(4) == b"late"
            relay.mode = "refuse"
            assert sock.recv(4) == b""


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port_sync() -> Iterator[int]:
    """An echo server on threads of its own, for the sync test."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server.server_address[1]
        server.shutdown()


@pytest.mark.redis
async def test_a_real_redis_client_sees_the_fault_and_the_recovery(redis_url: str) -> None:
    host, port = REDIS_URL.removeprefix("redis://").split("/")[0].split(":")
    async with tcp_relay(host, int(port)) as relay:
        client = aioredis.Redis(
            host=relay.host,
            port=relay.port,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
            retry=Retry(NoBackoff(), 0),  # the default retries with backoff for seconds
        )
        try:
            assert await client.ping()
            relay.mode = "blackhole"
            with pytest.raises(aioredis.TimeoutError):
                await client.ping()
            relay.mode = "refuse"
            with pytest.raises(aioredis.ConnectionError):
                await client.ping()
            relay.mode = "pass"
            assert await client.ping()
        finally:
            await client.aclose()
