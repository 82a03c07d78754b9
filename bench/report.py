"""The figures as tables (median [min-max] over the repeats) and as JSON."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.load import PhaseResult

Runs = Mapping[str, Sequence[PhaseResult]]


def _per(total: float | None, count: float) -> float:
    return total / count if total is not None and count else math.nan


def cpu_per_request(r: PhaseResult) -> float:
    return _per(r.proc_cpu_ms, r.requests)


def _spread(values: Sequence[float], digits: int) -> str:
    clean = [v for v in values if not math.isnan(v)]
    if not clean:
        return "-"
    median = statistics.median(clean)
    if len(clean) == 1:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} [{min(clean):.{digits}f}-{max(clean):.{digits}f}]"


def _figure(runs: Runs, name: str, of: Callable[[PhaseResult], float]) -> list[float]:
    return [of(r) for r in runs.get(name, ())]


def _paired(runs: Runs, first: str, second: str) -> list[tuple[PhaseResult, PhaseResult]]:
    """The two phases' results repeat by repeat; none when a phase was not run (`--only`)."""
    a, b = runs.get(first, ()), runs.get(second, ())
    return list(zip(a, b, strict=True)) if a and b else []


def _added(runs: Runs, target: str, kind: str, of: Callable[[PhaseResult], float]) -> list[float]:
    pairs = _paired(runs, f"{target}-{kind}-c1", f"direct-{kind}-c1")
    return [of(r) - of(d) for r, d in pairs]


def _marginal_event(runs: Runs, target: str) -> list[float]:
    out = []
    for plain, stream in _paired(runs, f"{target}-json-c16", f"{target}-sse-c16"):
        per_request = stream.events / stream.requests if stream.requests else math.nan
        out.append((cpu_per_request(stream) - cpu_per_request(plain)) / per_request)
    return out


def _over_floor(runs: Runs, target: str) -> list[float]:
    """How many times the floor's CPU a gateway's request costs (pairs from the same repeat)."""
    pairs = _paired(runs, f"{target}-json-c16", "floor-json-c16")
    return [cpu_per_request(r) / cpu_per_request(f) for r, f in pairs]


def _p50(r: PhaseResult) -> float:
    return r.p50_ms


def _p99(r: PhaseResult) -> float:
    return r.p99_ms


def summary_table(runs: Runs) -> str:
    targets = ("direct", "floor", "production", "embedded")
    gateways = ("production", "embedded")
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Callable[[str], str]) -> None:
        rows.append((label, [cell(t) for t in targets]))

    for c in (1, 16, 64):
        rows.append(
            (
                f"CPU ms per non-stream request, c={c}",
                [_spread(_figure(runs, f"{t}-json-c{c}", cpu_per_request), 3) for t in targets],
            )
        )
    row(
        "CPU per request / floor's, c=16",
        lambda t: _spread(_over_floor(runs, t), 1) if t in gateways else "-",
    )
    row(
        "CPU ms per stream, c=16",
        lambda t: _spread(_figure(runs, f"{t}-sse-c16", cpu_per_request), 3),
    )
    row("marginal CPU ms per SSE event", lambda t: _spread(_marginal_event(runs, t), 4))
    row(
        "mock upstream CPU ms per request, c=16",
        lambda t: _spread(
            _figure(runs, f"{t}-json-c16", lambda r: _per(r.mock_cpu_ms, r.requests)), 3
        ),
    )
    for label, of in (("p50", _p50), ("p99", _p99)):
        rows.append(
            (
                f"added latency c=1 non-stream {label} ms",
                ["(base)"] + [_spread(_added(runs, t, "json", of), 2) for t in targets[1:]],
            )
        )
    row(
        "added TTFB c=1 stream p50 ms",
        lambda t: (
            "(base)"
            if t == "direct"
            else _spread(_added(runs, t, "sse", lambda r: r.ttfb_p50_ms), 2)
        ),
    )
    row(
        "throughput c=64 non-stream, req/s",
        lambda t: _spread(_figure(runs, f"{t}-json-c64", lambda r: r.rps), 0),
    )
    row(
        "RSS after load, MB",
        lambda t: _spread(_figure(runs, f"{t}-sse-c16", lambda r: (r.rss_kb or 0) / 1024), 0),
    )
    row(
        "mints/s, c=16",
        lambda t: (
            _spread(_figure(runs, f"{t}-mint-c16", lambda r: r.rps), 0) if t in gateways else "-"
        ),
    )
    row(
        "CPU ms per mint, c=16",
        lambda t: (
            _spread(_figure(runs, f"{t}-mint-c16", cpu_per_request), 2) if t in gateways else "-"
        ),
    )
    width = max(len(label) for label, _ in rows) + 2
    columns = [*rows, ("", list(targets))]
    cells = [max(len(c[i]) for _, c in columns) + 2 for i in range(len(targets))]
    lines = [
        f"{'figure':<{width}}" + "".join(f"{t:>{w}}" for t, w in zip(targets, cells, strict=True))
    ]
    lines.append("-" * len(lines[0]))
    lines += [
        f"{label:<{width}}" + "".join(f"{c:>{w}}" for c, w in zip(values, cells, strict=True))
        for label, values in rows
    ]
    return "\n".join(lines)


def phase_table(runs: Runs) -> str:
    head = (
        f"{'phase (last run)':<22}{'req':>7}{'err':>5}{'rps':>8}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'ttfb50':>8}{'ev/req':>7}{'cpu ms/req':>11}{'mock ms/req':>12}{'RSS MB':>8}"
    )
    lines = [head, "-" * len(head)]
    for name, results in runs.items():
        r = results[-1]
        lines.append(
            f"{name:<22}{r.requests:>7}{r.errors:>5}{r.rps:>8.0f}{r.p50_ms:>9.2f}"
            f"{r.p99_ms:>9.2f}{r.ttfb_p50_ms:>8.2f}{_per(r.events, r.requests):>7.1f}"
            f"{cpu_per_request(r):>11.3f}{_per(r.mock_cpu_ms, r.requests):>12.3f}"
            f"{(r.rss_kb or 0) / 1024:>8.1f}"
        )
    return "\n".join(lines)


def write_json(path: Path, meta: Mapping[str, Any], runs: Runs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)

    def clean(value: Any) -> Any:
        return None if isinstance(value, float) and math.isnan(value) else value

    document = {
        "meta": dict(meta),
        "phases": {
            name: [{k: clean(v) for k, v in asdict(r).items()} for r in results]
            for name, results in runs.items()
        },
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
