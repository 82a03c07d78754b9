"""The fleet's figures, from what the workers saw and the mock's counters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.fleet.fleet import Records, TurnDone
from bench.fleet.workload import ACCOUNTS, WINDOW_S, Maximum, percentile


def figures(
    records: Records,
    upstream: Mapping[str, Mapping[str, int]],
    maximum: Maximum,
    offered_tokens_per_s: float,
    seconds: float,
    fair: Maximum | None = None,
) -> dict[str, Any]:
    """Everything counted up to the end of the run (`seconds` after the start); `fair`: the
    maximum for the mix a router keeping fair shares serves (`workload.fair_maximum`)."""
    fair = fair or maximum
    turns = [t for t in records.turns if t.done_at <= seconds]
    served = sum(t.tokens for t in turns)
    received = sum(c["received"] for c in upstream.values())
    limited = sum(c["limited"] for c in upstream.values())
    lookups = sum(c["cache_lookups"] for c in upstream.values())
    hits = sum(c["cache_hits"] for c in upstream.values())
    times = [t.seconds for t in turns]
    tenants = sorted({t.tenant for t in turns} | set(records.given_up))
    return {
        "seconds": seconds,
        "maximum_tokens_per_s": round(maximum.tokens_per_s, 1),
        "offered_tokens_per_s": round(offered_tokens_per_s, 1),
        "offered_x_maximum": round(offered_tokens_per_s / maximum.tokens_per_s, 3),
        "goodput_tokens_per_s": round(served / seconds, 1),
        "goodput_pct_of_maximum": round(100 * served / seconds / maximum.tokens_per_s, 1),
        "fair_maximum_tokens_per_s": round(fair.tokens_per_s, 1),
        "goodput_pct_of_fair_maximum": round(100 * served / seconds / fair.tokens_per_s, 1),
        "goodput_pct_of_offered": round(100 * served / seconds / offered_tokens_per_s, 1),
        "turns_answered": len(turns),
        "turns_pct_of_maximum": round(100 * len(turns) / seconds / maximum.turns_per_s, 1),
        "upstream_requests": received,
        "upstream_429s": limited,
        "upstream_429s_per_1000": round(1000 * limited / received, 1) if received else None,
        "turns_given_up": sum(records.given_up.values()),
        "tasks": dict(records.tasks),
        "dispatch_ends": dict(records.ended),
        "hops": records.hops,
        "failed_calls": dict(records.failures),
        "failed_calls_by_account": dict(sorted(records.failures_by_account.items())),
        "upstream_429s_by_account": {a: c["limited"] for a, c in upstream.items()},
        "failed_calls_retry_after_p50_p99_s": {
            label: [_round(percentile(waits, 50)), _round(percentile(waits, 99))]
            for label, waits in records.retry_after.items()
        },
        "mint_refusals": dict(records.mint_refusals),
        "turn_p50_s": _round(percentile(times, 50)),
        "turn_p99_s": _round(percentile(times, 99)),
        "upstream_own_p99_s": _round(percentile([t.upstream_s for t in turns], 99)),
        "tenant_p99_s": {
            name: _round(percentile([t.seconds for t in turns if t.tenant == name], 99))
            for name in tenants
        },
        "tenant_p99_first_later_s": {
            name: [
                _round(percentile([t.seconds for t in mine if t.index == 0], 99)),
                _round(percentile([t.seconds for t in mine if t.index > 0], 99)),
            ]
            for name in tenants
            for mine in ([t for t in turns if t.tenant == name],)
        },
        "tenant_p99_first_after_warmup_s": {
            name: _round(percentile(_turns_after(turns, name, WINDOW_S, first=True), 99))
            for name in tenants
        },
        "tenant_p99_after_warmup_s": {
            name: _round(percentile(_turns_after(turns, name, WINDOW_S, first=False), 99))
            for name in tenants
        },
        "tenant_worst_first_turns": {
            name: [
                [round(t.done_at - t.seconds, 1), round(t.seconds, 2)]
                for t in sorted(
                    (t for t in turns if t.tenant == name and t.index == 0),
                    key=lambda t: -t.seconds,
                )[:5]
            ]
            for name in tenants
        },
        "tenant_turns": {name: sum(1 for t in turns if t.tenant == name) for name in tenants},
        "tenant_given_up": {name: records.given_up.get(name, 0) for name in tenants},
        "utilisation": _utilisation(upstream, seconds),
        "cache_hit_pct": round(100 * hits / lookups, 1) if lookups else None,
    }


def _turns_after(
    turns: list[TurnDone], tenant: str, warmup_s: float, *, first: bool
) -> list[float]:
    """The times of a tenant's turns (`first`: first turns only) wanted after the warm-up
    (the first window, while the buckets fill from empty, every worker starts its first task
    at once and the first tenant to ask fills the cold pool)."""
    return [
        t.seconds
        for t in turns
        if t.tenant == tenant and (t.index == 0 or not first) and t.done_at - t.seconds >= warmup_s
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _utilisation(upstream: Mapping[str, Mapping[str, int]], seconds: float) -> dict[str, Any]:
    """Per account, the share of its binding bucket's refill used in the run (buckets start
    empty, so `capacity / window x seconds` is all an account can ever serve)."""
    out: dict[str, Any] = {}
    used_of = {
        "requests": "requests",
        "tokens": "tokens",
        "input-tokens": "input_tokens",
        "output-tokens": "output_tokens",
    }
    for spec in ACCOUNTS:
        counters = upstream.get(spec.id, {})
        shares = {
            name: counters.get(used_of[name], 0) / (cap / WINDOW_S * seconds)
            for name, cap in spec.limits.items()
        }
        top = max(shares, key=lambda n: shares[n])
        out[spec.id] = {"pct": round(100 * shares[top], 1), "bucket": top}
    return out


def table(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One column per fleet."""
    names = list(runs)
    rows: list[tuple[str, Any]] = [
        ("offered (x maximum)", lambda f: f"{f['offered_x_maximum']:.2f}"),
        ("goodput, % of maximum", lambda f: f"{f['goodput_pct_of_maximum']:.1f} %"),
        (
            "goodput, % of the fair mix's maximum",
            lambda f: f"{f['goodput_pct_of_fair_maximum']:.1f} %",
        ),
        ("goodput, % of offered demand", lambda f: f"{f['goodput_pct_of_offered']:.1f} %"),
        ("turns answered, % of maximum", lambda f: f"{f['turns_pct_of_maximum']:.1f} %"),
        ("upstream 429s per 1,000 admitted", lambda f: f"{f['upstream_429s_per_1000']}"),
        ("turns given up", lambda f: f"{f['turns_given_up']}"),
        ("turn time p50 / p99 (s)", lambda f: f"{f['turn_p50_s']} / {f['turn_p99_s']}"),
        ("upstream's own p99 (s)", lambda f: f"{f['upstream_own_p99_s']}"),
    ]
    for tenant in sorted({t for f in runs.values() for t in f["tenant_p99_s"]}):
        rows += [
            (f"p99 {tenant} (s)", lambda f, t=tenant: f"{f['tenant_p99_s'].get(t)}"),
            (
                f"  wanted after the first {WINDOW_S:g} s",
                lambda f, t=tenant: f"{f['tenant_p99_after_warmup_s'].get(t)}",
            ),
        ]
    rows += [
        (
            f"utilisation {spec.id}",
            lambda f, a=spec.id: (
                f"{f['utilisation'][a]['pct']} % ({f['utilisation'][a]['bucket']})"
            ),
        )
        for spec in ACCOUNTS
    ]
    rows += [("prompt-cache hits", lambda f: f"{f['cache_hit_pct']} %")]
    width = max(len(label) for label, _ in rows) + 2
    lines = [f"{'':<{width}}" + "".join(f"{n:>26}" for n in names)]
    for label, render in rows:
        lines.append(f"{label:<{width}}" + "".join(f"{render(runs[n]):>26}" for n in names))
    return "\n".join(lines)
