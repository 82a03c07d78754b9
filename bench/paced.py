"""The rates fleets run at: paced requests against a slow upstream, and open paced streams.

Two load shapes the saturated phases of `bench.run` hide:

- **Paced rate** (`run_paced`): requests begun at a fixed rate (10 or 50 per second), an 8 KB
  chat body, an upstream that answers after 200-350 ms. Each request takes a free keep-alive
  connection or opens one, so the number in flight follows the upstream's latency, as a
  fleet's does. The CPU per request at these rates includes whatever the server spends per
  timer tick, per flush and per idle wake-up that saturation would spread over many requests.
- **Open streams** (`run_streams`): N connections, each running paced streams one after the
  other (first event after 200 ms, then 64 events every 20 ms, as the slow mock sends them).
  Reports the share of the ideal number of events delivered, the added inter-event gap p99,
  the added time to first event p99, stalls (a gap over 200 ms) and RSS per open stream.

The slow mock is `python -m bench.paced --port P`: the project's mock upstream with a script
that delays every answer.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench.load import cpu_seconds, rss_kb
from leasegate.demo.upstream import MockRequest, MockUpstream, Reply

FIRST_EVENT_S = 0.200
EVENT_GAP_S = 0.020
STREAM_EVENTS = 64
LATENCY_S = (0.200, 0.350)
STALL_S = 0.200


def ideal_stream_s(events: float) -> float:
    """How long an ideal server takes over a paced stream of `events` events."""
    return FIRST_EVENT_S + EVENT_GAP_S * max(0.0, events - 1)


STREAM_S = ideal_stream_s(STREAM_EVENTS)
"""One ideal stream of the slow mock, first event to last (1.46 s)."""
PACED_MODEL = "paced"
"""The model the bench's accounts file serves from the slow mock only."""
FLAKY_MODEL = "paced-flaky"
"""Served by an account of its own on the slow mock, which refuses every request to it:
429 with `retry-after` and 500 in turn (the soak's 1 % of failing requests)."""
FLAKY_SERVED = "gpt-4o-flaky"
_flaky_replies = itertools.cycle(
    (
        Reply(status=429, headers={"retry-after": "1"}),
        Reply(status=500),
    )
)


def _script(request: MockRequest) -> Reply:
    if request.json is not None and request.json.get("model") == FLAKY_SERVED:
        return next(_flaky_replies)
    if request.stream:
        return Reply(chunk_delays=(FIRST_EVENT_S,), chunk_delay_s=EVENT_GAP_S)
    return Reply(headers_delay_s=random.uniform(*LATENCY_S))


def chat_body(*, stream: bool, size: int = 8192, model: str = PACED_MODEL) -> bytes:
    """A chat request of about `size` bytes: a system prompt and a few turns of history."""
    turn = "Summarise the build log and propose the next step for the failing test. "
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    while len(json.dumps(messages)) < size - 200:
        role = "user" if len(messages) % 2 else "assistant"
        messages.append({"role": role, "content": turn * 8})
    body: dict[str, object] = {"model": model, "messages": messages, "stream": stream}
    if stream:
        # as an agent that meters its own spend asks: the upstream's usage chunk then reaches
        # the caller, so every target delivers the same events (a proxy asked for no usage
        # drops that chunk, which a count of events per gap would read as 20 ms added)
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def render(base_url: str, key: str, body: bytes) -> bytes:
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {urlsplit(base_url).netloc}\r\n"
        f"authorization: Bearer {key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    return int(lines[0].split(" ", 2)[1]), headers


async def read_body(
    reader: asyncio.StreamReader, headers: dict[str, str], arrivals: list[tuple[float, int]]
) -> None:
    """Reads the body; appends (arrival time, SSE events) for every chunk with events."""
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
        return
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return
        data = await reader.readexactly(size + 2)
        events = data.count(b"data:")
        if events:
            arrivals.append((time.perf_counter(), events))


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class _Cpu:
    """CPU seconds of the watched processes (and this one) between start and stop."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self._pids = {k: v for k, v in pids.items() if v is not None}
        self._before = {k: cpu_seconds(p) for k, p in self._pids.items()}
        self._client = time.process_time()
        self._start = time.perf_counter()

    def stop(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self._start
        used = {
            f"{k}_cpu_ms": (cpu_seconds(p) - self._before[k]) * 1000 for k, p in self._pids.items()
        }
        used["client_cpu_pct"] = 100 * (time.process_time() - self._client) / elapsed
        used["elapsed_s"] = elapsed
        return used


@dataclass
class PacedResult:
    rate: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_per_request_ms(self) -> float:
        return (
            self.cpu.get("server_cpu_ms", float("nan")) / self.requests
            if self.requests
            else float("nan")
        )


async def run_paced(
    base_url: str, request: bytes, *, rate: float, duration_s: float, pid: int, mock_pid: int
) -> PacedResult:
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    latencies: list[float] = []
    errors = 0

    async def one() -> None:
        nonlocal errors
        conn = idle.pop() if idle else await asyncio.open_connection(host, port)
        start = time.perf_counter()
        try:
            conn[1].write(request)
            status, headers = await read_head(conn[0])
            await read_body(conn[0], headers, [])
        except (OSError, asyncio.IncompleteReadError):
            errors += 1
            conn[1].close()
            return
        if 200 <= status < 300:
            latencies.append(time.perf_counter() - start)
        else:
            errors += 1
        idle.append(conn)

    # a short warm-up opens the connections the rate needs
    for _ in range(max(1, int(rate * 0.35))):
        await one()
    meter = _Cpu({"server": pid, "mock": mock_pid})
    tasks = []
    begin = time.perf_counter()
    total = int(rate * duration_s)
    for i in range(total):
        await asyncio.sleep(max(0.0, begin + i / rate - time.perf_counter()))
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    cpu = meter.stop()
    for _, writer in idle:
        writer.close()
    return PacedResult(rate, len(latencies), errors, _p(latencies, 0.5), _p(latencies, 0.99), cpu)


@dataclass
class StreamsResult:
    concurrency: int
    streams: int
    errors: int
    completion_pct: float
    """Events delivered / the events of an ideal server, on which each connection begins a
    stream every 1.46 s until the phase ends."""
    added_gap_p99_ms: float
    added_first_event_p99_ms: float
    stalls: int
    rss_per_stream_kb: float
    cpu: dict[str, float] = field(default_factory=dict)


async def run_streams(
    base_url: str,
    request: bytes,
    *,
    concurrency: int,
    duration_s: float,
    pid: int,
    mock_pid: int,
    spread_s: float = STREAM_S,
) -> StreamsResult:
    """`spread_s`: the connections' first streams start evenly over it. Over one stream (the
    default), streams start and end at a steady rate, as a fleet's independent workers' do;
    over `FIRST_EVENT_S`, all N start within 200 ms and, every stream lasting the same, stay
    in step: a burst of N admissions every 1.46 s (the worst case for time to first event)."""
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    rss_before = rss_kb(pid)
    end = time.perf_counter() + duration_s
    gaps: list[float] = []
    firsts: list[float] = []
    counts = {"streams": 0, "errors": 0, "events": 0, "stalls": 0}
    rss_peak = [rss_before]

    async def worker(offset: float) -> None:
        await asyncio.sleep(offset)
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            counts["errors"] += 1
            return
        try:
            while time.perf_counter() < end:
                arrivals: list[tuple[float, int]] = []
                start = time.perf_counter()
                writer.write(request)
                status, headers = await read_head(reader)
                await read_body(reader, headers, arrivals)
                if status != 200 or not arrivals:
                    counts["errors"] += 1
                    continue
                counts["streams"] += 1
                counts["events"] += sum(n for _, n in arrivals)
                firsts.append(arrivals[0][0] - start - FIRST_EVENT_S)
                for (before, _), (after, n) in itertools.pairwise(arrivals):
                    gap = after - before
                    counts["stalls"] += gap > STALL_S
                    gaps.append(gap - EVENT_GAP_S * n)
        except (OSError, asyncio.IncompleteReadError):
            counts["errors"] += 1
        finally:
            writer.close()

    async def sample_rss() -> None:
        while time.perf_counter() < end:
            await asyncio.sleep(0.5)
            rss_peak[0] = max(rss_peak[0], rss_kb(pid))

    meter = _Cpu({"server": pid, "mock": mock_pid})
    sampler = asyncio.ensure_future(sample_rss())
    await asyncio.gather(*(worker(spread_s * i / concurrency) for i in range(concurrency)))
    sampler.cancel()
    cpu = meter.stop()
    per_stream = counts["events"] / counts["streams"] if counts["streams"] else STREAM_EVENTS
    # an ideal server's streams: each connection, `spread_s * i / concurrency` late, begins
    # one every ideal stream's length until the phase's end
    ideal_s = ideal_stream_s(per_stream)
    ideal_streams = sum(
        math.ceil((duration_s - spread_s * i / concurrency) / ideal_s) for i in range(concurrency)
    )
    ideal_events = ideal_streams * per_stream
    return StreamsResult(
        concurrency=concurrency,
        streams=counts["streams"],
        errors=counts["errors"],
        completion_pct=min(100.0, 100 * counts["events"] / ideal_events),
        added_gap_p99_ms=_p(gaps, 0.99),
        added_first_event_p99_ms=_p(firsts, 0.99),
        stalls=counts["stalls"],
        rss_per_stream_kb=(rss_peak[0] - rss_before) / concurrency,
        cpu=cpu,
    )


async def _serve(port: int) -> None:
    upstream = MockUpstream(_script, chunks=STREAM_EVENTS)
    await upstream.start("127.0.0.1", port)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, done.set)
    sys.stderr.write(f"slow mock upstream listening on {upstream.url}\n")
    await done.wait()
    await upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.paced")
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(_serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
