"""Load from `wrk` (Debian's package `wrk`), when it is installed: a C generator that costs far
less per request than any Python one, so the machine's second core is not spent on the load.

One thread, `concurrency` connections, a fixed duration; the request is set by a small Lua
script. wrk reports throughput and latency percentiles; the CPU of the watched processes is
read from /proc around the run, as for the Python generator (bench/load.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.load import PhaseResult, cpu_seconds, rss_kb

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
_LATENCY = re.compile(r"^\s*(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_REQUESTS = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


def available() -> bool:
    return shutil.which("wrk") is not None


def _lua(body: bytes, headers: dict[str, str], keys: Sequence[str]) -> str:
    lines = ['wrk.method = "POST"', f"wrk.body = {_lua_string(body.decode())}"]
    lines += [f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in headers.items()]
    if len(keys) > 1:
        # one request per key in turn: each connection walks the list from its own start
        listed = ", ".join(_lua_string(f"Bearer {key}") for key in keys)
        lines += [
            f"local keys = {{{listed}}}",
            "local turn = math.random(#keys)",
            "request = function()",
            "  turn = turn % #keys + 1",
            '  wrk.headers["authorization"] = keys[turn]',
            "  return wrk.format()",
            "end",
        ]
    return "\n".join(lines) + "\n"


def _lua_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_phase(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    concurrency: int,
    duration_s: float,
    watch_pid: int,
    mock_pid: int,
    events_per_request: float,
    keys: Sequence[str] = (),
) -> PhaseResult:
    """`keys`: more than one, and the requests take their `authorization` from them in turn
    (`headers` gives the first request's)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "request.lua"
        script.write_text(_lua(body, headers, keys))
        argv = ["wrk", "-t1", f"-c{concurrency}", f"-d{duration_s:g}s", "--latency"]
        argv += ["-s", str(script), url]
        cpu_before, mock_before = cpu_seconds(watch_pid), cpu_seconds(mock_pid)
        started = time.perf_counter()
        done = subprocess.run(  # noqa: S603 - wrk with fixed arguments
            argv, capture_output=True, text=True, check=True, timeout=duration_s + 30
        )
        elapsed = time.perf_counter() - started
        cpu = (cpu_seconds(watch_pid) - cpu_before) * 1000
        mock_cpu = (cpu_seconds(mock_pid) - mock_before) * 1000
    out = done.stdout
    found = _REQUESTS.search(out)
    if found is None:
        raise RuntimeError(f"wrk printed no request count:\n{out}")
    requests = int(found.group(1))
    seconds = float(found.group(2)) * _UNITS[found.group(3)] / 1000
    latency = {q: float(v) * _UNITS[unit] for q, v, unit in _LATENCY.findall(out)}
    non_2xx = _NON_2XX.search(out)
    socket_errors = _SOCKET_ERRORS.search(out)
    errors = int(non_2xx.group(1)) if non_2xx else 0
    errors += sum(int(n) for n in socket_errors.groups()) if socket_errors else 0
    return PhaseResult(
        requests=requests,
        errors=errors,
        statuses={},
        elapsed_s=seconds or elapsed,
        rps=requests / (seconds or elapsed),
        p50_ms=latency.get("50", float("nan")),
        p99_ms=latency.get("99", float("nan")),
        ttfb_p50_ms=float("nan"),
        events=round(requests * events_per_request),
        proc_cpu_ms=cpu,
        mock_cpu_ms=mock_cpu,
        client_cpu_pct=float("nan"),
        rss_kb=rss_kb(watch_pid),
    )
