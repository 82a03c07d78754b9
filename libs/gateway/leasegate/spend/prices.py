"""Prices per million tokens and the cost of one request, in `Decimal` only.

A price is a decimal string in the accounts file ("2.50"), never a float, so "0.1" means one
tenth exactly. A request's cost is rounded once, at the end, half-even to `COST_QUANTUM`
(a billionth of the currency unit): enough for a single cached token at any real price.

Providers count input differently: OpenAI's `prompt_tokens` include the cached ones (its
`cached_tokens` is a part of them), Anthropic's `input_tokens` exclude cache reads and writes
(reported beside them). `TokenCounts` takes the row's counts as the provider reported them and
the flag saying which convention applies, and splits input into its uncached part once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

COST_QUANTUM = Decimal("0.000000001")
_MILLION = Decimal(1_000_000)
_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True, slots=True)
class Prices:
    """Per million tokens, in the accounts file's currency. A cache price left out is charged
    at the input price."""

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None


@dataclass(frozen=True, slots=True)
class TokenCounts:
    input_tokens: int | None
    output_tokens: int | None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    input_includes_cache: bool = False
    """True where the provider's input count already contains the cached tokens (OpenAI)."""

    @property
    def uncached_input(self) -> int:
        total = self.input_tokens or 0
        if self.input_includes_cache:
            total -= (self.cache_read_input_tokens or 0) + (self.cache_creation_input_tokens or 0)
        return max(total, 0)

    @property
    def total(self) -> int:
        """Every token the upstream reported: input (with cache reads and writes) + output."""
        return (
            self.uncached_input
            + (self.cache_read_input_tokens or 0)
            + (self.cache_creation_input_tokens or 0)
            + (self.output_tokens or 0)
        )

    @property
    def reported(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None


def cost_of(tokens: TokenCounts, prices: Prices | None) -> Decimal | None:
    """The request's cost; None when the model has no prices or the upstream reported no
    usage (unknown is not zero)."""
    if prices is None or not tokens.reported:
        return None
    cache_read = prices.cache_read if prices.cache_read is not None else prices.input
    cache_write = prices.cache_write if prices.cache_write is not None else prices.input
    per_million = (
        tokens.uncached_input * prices.input
        + (tokens.output_tokens or 0) * prices.output
        + (tokens.cache_read_input_tokens or 0) * cache_read
        + (tokens.cache_creation_input_tokens or 0) * cache_write
    )
    return (per_million / _MILLION).quantize(COST_QUANTUM, rounding=ROUND_HALF_EVEN)


def parse_prices(raw: object) -> Prices:
    """A `prices:` mapping from the accounts file; ValueError names the field that is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError("prices must be a mapping of input, output, cache_read, cache_write")
    unknown = sorted(str(k) for k in raw if k not in _PRICE_FIELDS)
    if unknown:
        raise ValueError(f"prices: unknown field {unknown[0]!r}")
    for required in ("input", "output"):
        if raw.get(required) is None:
            raise ValueError(f"prices: {required!r} is required")
    values = {name: _price(name, raw.get(name)) for name in _PRICE_FIELDS}
    return Prices(
        input=_required(values["input"]),
        output=_required(values["output"]),
        cache_read=values["cache_read"],
        cache_write=values["cache_write"],
    )


def parse_amount(raw: object, what: str) -> Decimal:
    """A non-negative decimal amount given as a string (or an integer), never a float."""
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ValueError(f'{what} must be a decimal string such as "2.50"')
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ValueError(f'{what} must be a decimal string such as "2.50"') from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{what} must be a finite, non-negative amount")
    return value


def _price(name: str, raw: object) -> Decimal | None:
    return None if raw is None else parse_amount(raw, f"prices: {name!r}")


def _required(value: Decimal | None) -> Decimal:
    if value is None:
        raise ValueError("a required price is missing")
    return value
