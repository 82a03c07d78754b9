"""The fleet's accounts, its tasks and the arithmetic around them, pure.

Limits are per `WINDOW_S` (10 s) instead of per minute, so a run of a minute sees six
windows; everything else in the mock's time (latency, think times, the gateway's base
cooldown) is in real seconds at that scale. A declared `rpm`/`tpm` is the per-minute rate the
same bucket refills at (limit per 10 s x 6), with `burst_s` 10: the bucket holds 10 s of it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

WINDOW_S = 10.0
MODEL = "fleet-model"
CHARS_PER_TOKEN = 4
Kind = Literal["openai", "anthropic", "openai-compatible"]
Headers = Literal["openai", "anthropic", "none"]


@dataclass(frozen=True, slots=True)
class AccountSpec:
    id: str
    kind: Kind
    headers: Headers
    served: str
    limits: Mapping[str, int]
    """Bucket name -> capacity per WINDOW_S: `requests` and `tokens` (OpenAI-style), or
    `requests`, `input-tokens` and `output-tokens` (Anthropic)."""

    @property
    def secret(self) -> str:
        return f"sk-fleet-{self.id}"

    @property
    def credential_env(self) -> str:
        return "LEASEGATE_CRED_FLEET_" + self.id.upper().replace("-", "_")

    def declared(self) -> dict[str, int]:
        """The published per-minute limits an operator would write for a headerless kind, and
        the burst the mock's bucket allows: `WINDOW_S` seconds of the rate (time is scaled:
        a bucket holding a minute's limit would take bursts six times the mock's)."""
        scale = 60.0 / WINDOW_S
        return {
            "rpm": int(self.limits["requests"] * scale),
            "tpm": int(self.limits["tokens"] * scale),
            "burst_s": int(WINDOW_S),
        }


# Unequal sizes; requests bind on oa-large and plain, tokens on the others. In pool order.
ACCOUNTS: tuple[AccountSpec, ...] = (
    AccountSpec(
        "oa-large", "openai", "openai", "gpt-4o-fleet", {"requests": 40, "tokens": 180_000}
    ),
    AccountSpec(
        "oa-medium", "openai", "openai", "gpt-4o-fleet", {"requests": 60, "tokens": 80_000}
    ),
    AccountSpec(
        "an-claude",
        "anthropic",
        "anthropic",
        "claude-fleet",
        {"requests": 50, "input-tokens": 20_000, "output-tokens": 12_000},
    ),
    AccountSpec(
        "plain", "openai-compatible", "none", "plain-fleet", {"requests": 20, "tokens": 150_000}
    ),
    AccountSpec("oa-small", "openai", "openai", "gpt-4o-fleet", {"requests": 30, "tokens": 25_000}),
)


@dataclass(frozen=True, slots=True)
class Turn:
    prompt_tokens: int
    """The whole conversation so far, as sent (it grows every turn)."""
    added_tokens: int
    """What this turn appends to the conversation (a tool result, a user message)."""
    max_tokens: int
    """Asked for and, in the mock, produced."""
    think_s: float
    """The worker's pause after this turn's answer (tool calls, reading)."""
    cached_tokens: int = 0
    """The previous turn's prompt: what a prompt-cache hit reads (the session stayed)."""

    def costs(self, kind: Kind) -> dict[str, float]:
        if kind == "anthropic":
            # Anthropic's input-token limit counts no cache reads (most current models); the
            # session is assumed to stay on its account, as every fleet here keeps it
            return {
                "requests": 1,
                "input-tokens": self.prompt_tokens - self.cached_tokens,
                "output-tokens": self.max_tokens,
            }
        return {"requests": 1, "tokens": self.prompt_tokens + self.max_tokens}

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens


@dataclass(frozen=True, slots=True)
class TenantSpec:
    name: str
    share: float
    """Of the fleet's offered tokens."""
    turns: tuple[int, int]
    first_prompt: tuple[int, int]
    added: tuple[int, int]
    output: tuple[int, int]
    think_s: tuple[float, float]
    idle_s: tuple[float, float]
    """Between one task's end and the worker's next."""


TENANTS: tuple[TenantSpec, ...] = (
    TenantSpec(
        "fleet/batch", 0.85, (6, 8), (900, 1500), (250, 600), (100, 300), (0.5, 1.5), (0.5, 1.5)
    ),
    TenantSpec(
        "fleet/interactive", 0.15, (4, 6), (400, 800), (100, 300), (60, 160), (1.0, 2.5), (1.0, 3.0)
    ),
)


def latency_s(output_tokens: int) -> float:
    """The mock's own time to answer: a fixed part plus one per output token."""
    return 0.15 + 0.002 * output_tokens


def task(tenant: TenantSpec, rng: random.Random) -> tuple[Turn, ...]:
    count = rng.randint(*tenant.turns)
    turns: list[Turn] = []
    prompt = 0
    previous_output = 0
    for index in range(count):
        added = rng.randint(*tenant.first_prompt) if index == 0 else rng.randint(*tenant.added)
        cached = prompt
        prompt += previous_output + added
        output = rng.randint(*tenant.output)
        turns.append(Turn(prompt, added, output, rng.uniform(*tenant.think_s), cached))
        previous_output = output
    return tuple(turns)


@dataclass(frozen=True, slots=True)
class Pace:
    """One worker's nominal pace: what it asks for when every turn is answered in the
    upstream's own time and nothing is refused."""

    tokens_per_s: float
    turns_per_s: float
    mean_costs: Mapping[Kind, Mapping[str, float]]
    """Per provider kind, the mean cost per turn in each bucket."""


def pace(tenant: TenantSpec, samples: int = 4000, seed: int = 7) -> Pace:
    rng = random.Random(seed)
    tokens = turns = 0.0
    seconds = 0.0
    sums: dict[Kind, dict[str, float]] = {"openai": {}, "anthropic": {}, "openai-compatible": {}}
    for _ in range(samples):
        work = task(tenant, rng)
        seconds += rng.uniform(*tenant.idle_s)
        for turn in work:
            tokens += turn.tokens
            turns += 1
            seconds += latency_s(turn.max_tokens) + turn.think_s
            for kind, acc in sums.items():
                for name, cost in turn.costs(kind).items():
                    acc[name] = acc.get(name, 0.0) + cost
    means = {kind: {n: v / turns for n, v in acc.items()} for kind, acc in sums.items()}
    return Pace(tokens / seconds, turns / seconds, means)


@dataclass(frozen=True, slots=True)
class Maximum:
    turns_per_s: float
    tokens_per_s: float
    per_account: Mapping[str, tuple[float, str]]
    """Account -> (turns per second it can serve, the bucket that binds)."""


def maximum(
    accounts: Sequence[AccountSpec], mix: Mapping[Kind, Mapping[str, float]], tokens_per_turn: float
) -> Maximum:
    """The pool's theoretical maximum for the fleet's mean turn: each account serves turns at
    the rate of its tightest bucket; buckets start empty, so no burst adds to it."""
    per: dict[str, tuple[float, str]] = {}
    for account in accounts:
        rates = {
            name: (cap / WINDOW_S) / mix[account.kind][name] for name, cap in account.limits.items()
        }
        binding = min(rates, key=lambda n: rates[n])
        per[account.id] = (rates[binding], binding)
    turns = sum(rate for rate, _ in per.values())
    return Maximum(turns, turns * tokens_per_turn, per)


def fair_maximum(
    accounts: Sequence[AccountSpec], paces: Mapping[str, Pace], workers: Mapping[str, int]
) -> Maximum:
    """The maximum for the mix a router keeping fair shares serves this fleet: a tenant
    offering less than an equal share of the pool (in tokens, at the offered mix's maximum)
    is served in full, and the others fill the rest of the pool in proportion to what they
    offer. On a saturated pool the served mix then leans to the small tenant, whose turns are
    smaller, and the pool's maximum in tokens is lower than at the offered mix (a pool bound
    by requests carries fewer tokens). Still the figure for every account serving that mix's
    mean turn: a router sorting heavy sessions onto accounts bound by requests could exceed
    it."""
    offered = {t: paces[t].tokens_per_s * n for t, n in workers.items()}
    mix, per_turn = blended_mix(paces, dict(workers))
    equal = maximum(accounts, mix, per_turn).tokens_per_s / max(1, len(workers))
    small = {t for t, tokens in offered.items() if tokens <= equal}

    def served(scale: float) -> dict[str, float]:
        return {t: n if t in small else n * scale for t, n in workers.items()}

    def room(scale: float) -> tuple[Maximum, float]:
        weights = served(scale)
        at_mix = maximum(accounts, *blended_mix(paces, weights))
        turns = sum(paces[t].turns_per_s * w for t, w in weights.items())
        return at_mix, at_mix.turns_per_s - turns

    low, high = 0.0, 64.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if room(middle)[1] >= 0 else (low, middle)
    return room(low)[0]


def blended_mix(
    paces: Mapping[str, Pace], weights: Mapping[str, float]
) -> tuple[dict[Kind, dict[str, float]], float]:
    """The fleet's mean turn (costs per kind, tokens) weighted by each tenant's turns."""
    total = sum(paces[t].turns_per_s * w for t, w in weights.items())
    mix: dict[Kind, dict[str, float]] = {}
    tokens = 0.0
    for tenant, weight in weights.items():
        share = paces[tenant].turns_per_s * weight / total
        tokens += share * paces[tenant].tokens_per_s / paces[tenant].turns_per_s
        for kind, costs in paces[tenant].mean_costs.items():
            into = mix.setdefault(kind, {})
            for name, cost in costs.items():
                into[name] = into.get(name, 0.0) + share * cost
    return mix, tokens


def fleet_size(
    load: float, tenants: Sequence[TenantSpec], max_tokens_per_s: float
) -> dict[str, int]:
    """Workers per tenant so the fleet offers `load` x the maximum, split by share."""
    return {
        t.name: max(1, round(load * t.share * max_tokens_per_s / pace(t).tokens_per_s))
        for t in tenants
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 10) - 1]
