"""The figures as a table and ratios against the direct baseline, and as JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.load import PhaseResult


def _per(total: float | None, count: int) -> float:
    return total / count if total is not None and count else math.nan


def summary(phases: Mapping[str, PhaseResult]) -> dict[str, float]:
    """Ratios and differences; keys name the figure and its unit."""
    out: dict[str, float] = {}
    for kind in ("json", "sse"):
        d1, p1 = phases[f"direct-{kind}-c1"], phases[f"proxy-{kind}-c1"]
        d64, p64 = phases[f"direct-{kind}-c64"], phases[f"proxy-{kind}-c64"]
        c64 = phases[f"capped-{kind}-c64"]
        out[f"{kind}_c1_added_p50_ms"] = p1.p50_ms - d1.p50_ms
        out[f"{kind}_c1_added_ttfb_p50_ms"] = p1.ttfb_p50_ms - d1.ttfb_p50_ms
        out[f"{kind}_c1_proxy_over_direct_rps"] = p1.rps / d1.rps
        out[f"{kind}_c64_proxy_over_direct_rps"] = p64.rps / d64.rps
        out[f"{kind}_c64_proxy_cpu_ms_per_request"] = _per(p64.proc_cpu_ms, p64.requests)
        out[f"{kind}_c64_capped_cpu_ms_per_request"] = _per(c64.proc_cpu_ms, c64.requests)
        out[f"{kind}_c64_ceiling_added_cpu_ms_per_request"] = (
            out[f"{kind}_c64_capped_cpu_ms_per_request"]
            - out[f"{kind}_c64_proxy_cpu_ms_per_request"]
        )
        out[f"{kind}_c64_capped_over_null_rps"] = c64.rps / p64.rps
    p_sse = phases["proxy-sse-c64"]
    out["sse_c64_proxy_cpu_ms_per_chunk"] = _per(p_sse.proc_cpu_ms, p_sse.events)
    return out


def table(phases: Mapping[str, PhaseResult], figures: Mapping[str, float]) -> str:
    head = (
        f"{'phase':<16}{'req':>7}{'err':>5}{'rps':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'ttfb50':>8}{'ev/req':>7}{'cpu ms/req':>11}{'cpu ms/ev':>10}{'RSS MB':>8}"
        f"{'gen cpu%':>9}"
    )
    lines = [head, "-" * len(head)]
    for name, r in phases.items():
        lines.append(
            f"{name:<16}{r.requests:>7}{r.errors:>5}{r.rps:>9.0f}{r.p50_ms:>9.2f}"
            f"{r.p99_ms:>9.2f}{r.ttfb_p50_ms:>8.2f}{_per(r.events, r.requests):>7.1f}"
            f"{_per(r.proc_cpu_ms, r.requests):>11.3f}{_per(r.proc_cpu_ms, r.events):>10.4f}"
            f"{(r.rss_kb or 0) / 1024:>8.1f}{r.client_cpu_pct:>9.0f}"
        )
    lines.append("")
    for kind, label in (("json", "non-streaming"), ("sse", "streaming (20 chunks)")):
        lines.append(f"{label}:")
        lines.append(
            f"  c1  added latency p50 {figures[f'{kind}_c1_added_p50_ms']:+.2f} ms, "
            f"added TTFB p50 {figures[f'{kind}_c1_added_ttfb_p50_ms']:+.2f} ms, "
            f"proxy/direct rps {figures[f'{kind}_c1_proxy_over_direct_rps']:.2f}x"
        )
        lines.append(
            f"  c64 proxy/direct rps {figures[f'{kind}_c64_proxy_over_direct_rps']:.2f}x, "
            f"proxy CPU {figures[f'{kind}_c64_proxy_cpu_ms_per_request']:.3f} ms/request"
        )
        lines.append(
            f"  c64 request_capacity 1000 vs null: CPU "
            f"{figures[f'{kind}_c64_capped_cpu_ms_per_request']:.3f} vs "
            f"{figures[f'{kind}_c64_proxy_cpu_ms_per_request']:.3f} ms/request "
            f"({figures[f'{kind}_c64_ceiling_added_cpu_ms_per_request']:+.3f} ms), "
            f"rps {figures[f'{kind}_c64_capped_over_null_rps']:.2f}x"
        )
    lines.append(
        f"streaming c64 proxy CPU per relayed SSE event: "
        f"{figures['sse_c64_proxy_cpu_ms_per_chunk']:.4f} ms"
    )
    return "\n".join(lines)


def write_json(
    path: Path,
    meta: Mapping[str, Any],
    phases: Mapping[str, PhaseResult],
    figures: Mapping[str, float],
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "meta": dict(meta),
        "phases": {name: asdict(r) for name, r in phases.items()},
        "summary": {k: (None if math.isnan(v) else round(v, 4)) for k, v in figures.items()},
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
