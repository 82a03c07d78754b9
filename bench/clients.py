"""`python -m bench.clients`: CPU per request of candidate upstream clients, side by side.

Each client sends the same non-streaming and streaming chat completions to the mock upstream
(its own process) at a fixed concurrency, through one pool of the proxy's size, reading every
body. The figure is this process's CPU time per request: what the client library itself costs
the proxy. Loopback only; a few seconds per client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path

import aiohttp
import httpcore
import httpx

from bench.stack import free_port, process, wait_port

Sender = Callable[[bytes], Awaitable[int]]
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
POOL = 100


async def _drive(send: Sender, body: bytes, concurrency: int, count: int) -> float:
    """CPU ms per request of this process while `count` requests complete."""
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send(body)

    for _ in range(50):  # warm the pool
        await send(body)
    before = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - before) * 1000 / count


async def _httpx(url: str) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    limits = httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL)
    client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(10.0, read=None))

    async def send(body: bytes) -> int:
        request = client.build_request("POST", url, content=body, headers=HEADERS)
        response = await client.send(request, stream=True)
        async for _ in response.aiter_raw():
            pass
        await response.aclose()
        return response.status_code

    return send, client.aclose


async def _httpcore(url: str) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    pool = httpcore.AsyncConnectionPool(max_connections=POOL, max_keepalive_connections=POOL)
    headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def send(body: bytes) -> int:
        async with pool.stream("POST", url, headers=headers, content=body) as response:
            async for _ in response.aiter_stream():
                pass
            return response.status

    return send, pool.aclose


async def _aiohttp(url: str) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    connector = aiohttp.TCPConnector(limit=POOL)
    session = aiohttp.ClientSession(
        connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
    )

    async def send(body: bytes) -> int:
        async with session.post(url, data=body, headers=HEADERS) as response:
            while await response.content.readany():
                pass
            return response.status

    return send, session.close


CLIENTS = {"httpx": _httpx, "httpcore": _httpcore, "aiohttp": _aiohttp}


async def _measure(url: str, concurrency: int, count: int, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name, make in CLIENTS.items():
        for stream in (False, True):
            body = json.dumps({**BODY, "stream": stream}).encode()
            send, close = await make(url)
            try:
                key = f"{name}-{'sse' if stream else 'json'}"
                out[key] = [await _drive(send, body, concurrency, count) for _ in range(repeats)]
            finally:
                await close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clients")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    argv = [sys.executable, "-m", "leasegate.demo.upstream", "--port", str(port)]
    logs = Path(__file__).parent / "results" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        stack.enter_context(process("clients-upstream", argv, {}, logs, None))
        wait_port(port)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        figures = asyncio.run(_measure(url, args.concurrency, args.requests, args.repeats))
    print(f"client CPU ms per request, c={args.concurrency}, median [min-max] of {args.repeats}")
    for name, values in figures.items():
        print(f"  {name:<14}{statistics.median(values):7.3f} [{min(values):.3f}-{max(values):.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
