"""A load generator on raw asyncio streams: keep-alive HTTP/1.1, one pre-rendered request per
phase, Content-Length and chunked responses. httpx costs several times more CPU per request,
and on two cores the generator shares the machine with the mock and the proxy.

Each phase runs `concurrency` workers for a fixed time after a short warm-up; it records the
latency, time to first body byte and SSE events per request, and the CPU time the watched
process (the proxy) used during the measured part.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)
    ttfbs: list[float] = field(default_factory=list)
    events: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PhaseResult:
    requests: int
    errors: int
    statuses: dict[int, int]
    elapsed_s: float
    rps: float
    p50_ms: float
    p99_ms: float
    ttfb_p50_ms: float
    events: int
    proc_cpu_ms: float | None
    """CPU the watched server process(es) used in the measured part."""
    mock_cpu_ms: float | None
    """CPU the mock upstream used in the same time (it must not be the bottleneck)."""
    client_cpu_pct: float
    rss_kb: int | None


def _tree(pid: int) -> list[int]:
    """The process and its children (a `--workers N` server is a supervisor and N workers)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children:
        return [pid, *(int(p) for p in children.read().split())]


HAS_SCHEDSTAT = os.path.exists("/proc/self/schedstat")


def cpu_seconds(pid: int) -> float:
    """CPU time of the process and its children so far, as the scheduler counted it (`run_ns`).
    /proc/<pid>/stat gives the same total in clock ticks (10 ms), too coarse for a paced phase
    (63 requests at 10/s cost about 150 ms, so ±7 % by rounding alone); it is the fallback on
    a kernel without schedstat."""
    if not HAS_SCHEDSTAT:
        return sum(map(_tick_seconds, _tree(pid)))
    return sum(map(run_ns, _tree(pid))) / 1e9


def run_ns(pid: int) -> int:
    """The process's run time so far: the sum of its threads'
    /proc/<pid>/task/<tid>/schedstat, in ns. A thread that ended no longer counts (a server's
    threads live as long as it does); one that ends while being read is skipped."""
    total = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            with open(f"{task.path}/schedstat", encoding="ascii") as schedstat:
                total += int(schedstat.read().split()[0])
        except (OSError, ValueError):
            continue
    return total


def _tick_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        # Fields after the parenthesised command name; utime and stime are fields 14, 15.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def rss_kb(pid: int) -> int:
    """Resident memory of the process and its children."""
    total = 0
    for member in _tree(pid):
        with open(f"/proc/{member}/status", encoding="ascii") as status:
            total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return total


def request_body(*, stream: bool) -> bytes:
    return json.dumps(
        {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "Say hello in twenty words."}],
            "stream": stream,
        }
    ).encode()


def request_bytes(base_url: str, key: str, *, stream: bool) -> bytes:
    parts = urlsplit(base_url)
    body = request_body(stream=stream)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"authorization: Bearer {key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, float, float, int, bool]:
    """One request; (status, latency, ttfb, SSE events, whether to keep the connection)."""
    start = time.perf_counter()
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    ttfb = 0.0
    events = 0
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
        ttfb = time.perf_counter() - start
    elif headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            data = await reader.readexactly(size + 2)
            if not ttfb:
                ttfb = time.perf_counter() - start
            events += data.count(b"data:")
    latency = time.perf_counter() - start
    return status, latency, ttfb, events, headers.get("connection") != "close"


@dataclass(frozen=True)
class _Window:
    start: float
    """perf_counter() when the warm-up ends: requests begun from here on are recorded."""
    end: float
    """No request begins after this."""


Request = bytes | Callable[[], bytes]
"""The same pre-rendered request every time, or a fresh one per call (e.g. distinct mints)."""


class RequestsExhausted(Exception):
    """Raised by a request callable with nothing left to send: the worker stops early."""


async def _worker(base_url: str, request: Request, window: _Window, record: Sample) -> None:
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while (begun := time.perf_counter()) < window.end:
            try:
                rendered = request if isinstance(request, bytes) else request()
            except RequestsExhausted:
                break
            status, latency, ttfb, events, keep = await _exchange(reader, writer, rendered)
            if begun >= window.start:
                record.statuses[status] = record.statuses.get(status, 0) + 1
                if 200 <= status < 300:
                    record.latencies.append(latency)
                    record.ttfbs.append(ttfb)
                    record.events += events
                else:
                    record.errors += 1
            if not keep:
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
    finally:
        writer.close()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def run_phase(
    base_url: str,
    request: Request,
    *,
    concurrency: int,
    duration_s: float,
    warmup_s: float,
    watch_pid: int | None,
    mock_pid: int | None = None,
) -> PhaseResult:
    now = time.perf_counter()
    window = _Window(now + warmup_s, now + warmup_s + duration_s)
    sample = Sample()
    workers = asyncio.gather(
        *(_worker(base_url, request, window, sample) for _ in range(concurrency))
    )
    # The connections stay open across the warm-up; the counters are read when it ends.
    await asyncio.sleep(max(0.0, window.start - time.perf_counter()))
    cpu_before = cpu_seconds(watch_pid) if watch_pid is not None else 0.0
    mock_before = cpu_seconds(mock_pid) if mock_pid is not None else 0.0
    client_before = time.process_time()
    start = time.perf_counter()
    await workers
    elapsed = time.perf_counter() - start
    client_cpu = time.process_time() - client_before
    proc_cpu = (cpu_seconds(watch_pid) - cpu_before) * 1000 if watch_pid is not None else None
    mock_cpu = (cpu_seconds(mock_pid) - mock_before) * 1000 if mock_pid is not None else None
    done = len(sample.latencies)
    return PhaseResult(
        requests=done,
        errors=sample.errors,
        statuses=sample.statuses,
        elapsed_s=elapsed,
        rps=done / elapsed,
        p50_ms=_percentile(sample.latencies, 0.50),
        p99_ms=_percentile(sample.latencies, 0.99),
        ttfb_p50_ms=_percentile(sample.ttfbs, 0.50),
        events=sample.events,
        proc_cpu_ms=proc_cpu,
        mock_cpu_ms=mock_cpu,
        client_cpu_pct=100 * client_cpu / elapsed,
        rss_kb=rss_kb(watch_pid) if watch_pid is not None else None,
    )
