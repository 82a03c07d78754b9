"""Parse the accounts document into a Registry, and answer "who serves this model, in order".

Pure: the YAML is loaded by the caller, and which credential variables are set is passed in,
so nothing here reads a file or the environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from leasegate.providers import KINDS, OptionError, ProviderKind, kind_named
from leasegate.spend.prices import Prices, parse_prices

Provider = str
"""A provider kind's name (`leasegate.providers.KINDS`)."""

ACCOUNT_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
CREDENTIAL_ENV = re.compile(r"LEASEGATE_CRED_[A-Z0-9_]+")
CURRENCY = re.compile(r"[A-Z]{3}")

_FIELDS = frozenset(
    {
        "id",
        "provider",
        "base_url",
        "credential_env",
        "models",
        "lease_capacity",
        "request_capacity",
        "headers_timeout_s",
        "first_token_timeout_s",
        "stream_idle_timeout_s",
        "max_connections",
        "pass_malformed_events",
        "propagate_trace",
    }
)


@dataclass(frozen=True, slots=True)
class DeclaredLimits:
    """A served model's published rate limits, per minute, for kinds whose answers carry no
    rate-limit headers (the headers win where they are sent); `output_estimate`: the output
    tokens a request that names no `max_tokens` is estimated at."""

    rpm: int | None = None
    tpm: int | None = None
    input_tpm: int | None = None
    output_tpm: int | None = None
    output_estimate: int | None = None
    burst_s: int | None = None
    """The seconds of its rate a declared limit lets through at once (None: a minute's, the
    whole per-minute limit); a provider enforcing its per-minute limit over shorter windows
    (Azure's over 10 s or 1 s) takes bursts of no more than that share of it."""


_LIMIT_FIELDS = ("rpm", "tpm", "input_tpm", "output_tpm", "output_estimate", "burst_s")


class AccountsFileError(ValueError):
    """One line naming the account and the field that is wrong."""


@dataclass(frozen=True, slots=True)
class Account:
    id: str
    provider: Provider
    """The kind's name; `kind` is the kind itself."""
    base_url: str
    """Origin (and optional path prefix) the request path is appended to; no trailing slash."""
    credential_env: str
    """The key's variable; empty for an account signed from its cloud's chain."""
    models: Mapping[str, str]
    """Requested name -> served name."""
    configured: bool
    """Whether the credential variable is set and non-empty; unconfigured is never selected."""
    lease_capacity: int | None = None
    request_capacity: int | None = None
    headers_timeout_s: float | None = None
    """None: the LEASEGATE_UPSTREAM_HEADERS_TIMEOUT_S default."""
    first_token_timeout_s: float | None = None
    stream_idle_timeout_s: float | None = None
    max_connections: int | None = None
    """Size of this account's own connection pool; None: the global default."""
    pass_malformed_events: bool = False
    """Relay a stream byte-exact, even data events that are not JSON (default: drop them)."""
    propagate_trace: bool = False
    """Send the W3C `traceparent`/`tracestate` to this account's upstream (default: never)."""
    context_windows: Mapping[str, int] = field(default_factory=dict)
    """Requested name -> its declared context window in tokens (only where declared)."""
    context_fallbacks: Mapping[str, str] = field(default_factory=dict)
    """Requested name -> the requested model to hop to when its context is exceeded."""
    prices: Mapping[str, Prices] = field(default_factory=dict)
    """Requested name -> prices per million tokens, for the models that declare them."""
    options: Mapping[str, str] = field(default_factory=dict)
    """The kind's own fields, checked by it (e.g. azure-openai's `api_version`)."""
    limits: Mapping[str, DeclaredLimits] = field(default_factory=dict)
    """Served name -> its declared rate limits, for the models that declare any."""
    kind: ProviderKind = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", kind_named(self.provider))

    @property
    def input_includes_cache(self) -> bool:
        """Whether the kind's input count contains the cached tokens (OpenAI's does,
        Anthropic counts them beside it)."""
        return self.kind.input_includes_cache

    @property
    def region(self) -> str | None:
        """The cloud region the account serves from (bedrock's `region`, vertex's `location`);
        None for a kind without one."""
        return self.kind.region(self.options)


@dataclass(frozen=True, slots=True)
class Candidate:
    position: int
    account: Account
    served_model: str


@dataclass(frozen=True)
class Registry:
    accounts: tuple[Account, ...]
    currency: str | None = None
    """The currency every price in the file is in (named once, at the top)."""
    _by_id: Mapping[str, Account] = field(init=False, repr=False)
    _by_model: Mapping[str, tuple[Candidate, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_model: dict[str, list[Candidate]] = {}
        for account in self.accounts:
            for requested, served in account.models.items():
                ranked = by_model.setdefault(requested, [])
                ranked.append(Candidate(len(ranked), account, served))
        object.__setattr__(self, "_by_id", {a.id: a for a in self.accounts})
        object.__setattr__(self, "_by_model", {m: tuple(c) for m, c in by_model.items()})

    def context_fallback(self, model: str) -> str | None:
        """The requested model a context-length failure of `model` may hop to (every account
        declaring one for `model` names the same; `parse_accounts` checks)."""
        for account in self.accounts:
            if (fallback := account.context_fallbacks.get(model)) is not None:
                return fallback
        return None

    def candidates(self, model: str) -> tuple[Candidate, ...]:
        """Every account serving `model`, in registry order; empty when nobody does."""
        return self._by_model.get(model, ())

    def account(self, account_id: str) -> Account | None:
        return self._by_id.get(account_id)


def parse_accounts(document: object, configured_envs: Set[str]) -> Registry:
    """Validate the loaded YAML document. `configured_envs`: credential variables that are set."""
    if document is None:
        return Registry(())
    if not isinstance(document, Mapping) or set(document) - {"accounts", "currency"}:
        raise AccountsFileError(
            "accounts file: the top level must be a mapping of 'accounts' (and 'currency')"
        )
    currency = document.get("currency")
    if currency is not None and not (isinstance(currency, str) and CURRENCY.fullmatch(currency)):
        raise AccountsFileError("accounts file: 'currency' must be a code such as USD or EUR")
    entries = document.get("accounts") or []
    if not isinstance(entries, list):
        raise AccountsFileError("accounts file: 'accounts' must be a list")
    accounts: list[Account] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        account = _parse_account(index, entry, configured_envs)
        if account.id in seen:
            raise AccountsFileError(
                f"accounts file: account {account.id!r}: field 'id': duplicate id"
            )
        seen.add(account.id)
        accounts.append(account)
    _check_fallbacks(accounts)
    if currency is None and any(a.prices for a in accounts):
        raise AccountsFileError("accounts file: prices are given, so 'currency' must be named")
    return Registry(tuple(accounts), currency)


def _check_fallbacks(accounts: list[Account]) -> None:
    """Every `context_fallback` names a model some account serves, and all accounts agree."""
    served = {model for account in accounts for model in account.models}
    declared: dict[str, str] = {}
    for account in accounts:
        for model, fallback in account.context_fallbacks.items():
            where = f"accounts file: account {account.id!r}: model {model!r}: 'context_fallback'"
            if fallback not in served:
                raise AccountsFileError(f"{where}: no account serves {fallback!r}")
            if declared.setdefault(model, fallback) != fallback:
                raise AccountsFileError(f"{where}: another account names {declared[model]!r}")


def _parse_account(index: int, entry: object, configured_envs: Set[str]) -> Account:
    if not isinstance(entry, Mapping):
        raise AccountsFileError(f"accounts file: account #{index}: must be a mapping")
    raw_id = entry.get("id")
    name = f"account {raw_id!r}" if isinstance(raw_id, str) else f"account #{index}"

    def fail(field_name: str, why: str) -> AccountsFileError:
        return AccountsFileError(f"accounts file: {name}: field '{field_name}': {why}")

    provider = entry.get("provider")
    kind = KINDS.get(provider) if isinstance(provider, str) else None
    fields = _FIELDS | kind.option_fields if kind is not None else _FIELDS
    unknown = sorted(str(k) for k in entry if k not in fields)
    if unknown:
        raise fail(unknown[0], "unknown field" + (f" for provider {provider!r}" if kind else ""))
    if not isinstance(raw_id, str) or not ACCOUNT_ID.fullmatch(raw_id):
        raise fail("id", "must match [a-z0-9][a-z0-9-]{0,62}")
    if kind is None:
        raise fail("provider", f"must be one of {', '.join(KINDS)}")
    try:
        options = kind.options(entry)
    except OptionError as exc:
        raise fail(exc.field_name, str(exc)) from None
    base_url = entry.get("base_url")
    if not isinstance(base_url, str) or not _is_http_url(base_url):
        raise fail("base_url", "must be an http(s) URL")
    credential_env = entry.get("credential_env")
    # a kind signed from its cloud's own chain (Bedrock, Vertex) needs no key variable
    keyless = kind.cloud_auth is not None and credential_env is None
    if not keyless and (
        not isinstance(credential_env, str) or not CREDENTIAL_ENV.fullmatch(credential_env)
    ):
        raise fail("credential_env", "must match LEASEGATE_CRED_[A-Z0-9_]+")
    specs = _parse_models(entry.get("models"), fail)
    for requested, served in specs.served.items():
        if (problem := kind.served_problem(served)) is not None:
            raise fail("models", f"model {requested!r}: {problem}")
    return Account(
        id=raw_id,
        provider=kind.name,
        options=options,
        base_url=base_url.rstrip("/"),
        credential_env=credential_env if isinstance(credential_env, str) else "",
        models=specs.served,
        prices=specs.prices,
        context_windows=specs.windows,
        context_fallbacks=specs.fallbacks,
        limits={specs.served[m]: limits for m, limits in specs.limits.items()},
        configured=keyless or credential_env in configured_envs,
        lease_capacity=_capacity(entry.get("lease_capacity"), "lease_capacity", fail),
        request_capacity=_capacity(entry.get("request_capacity"), "request_capacity", fail),
        headers_timeout_s=_seconds(entry.get("headers_timeout_s"), "headers_timeout_s", fail),
        first_token_timeout_s=_seconds(
            entry.get("first_token_timeout_s"), "first_token_timeout_s", fail
        ),
        stream_idle_timeout_s=_seconds(
            entry.get("stream_idle_timeout_s"), "stream_idle_timeout_s", fail
        ),
        max_connections=_positive(entry.get("max_connections"), "max_connections", fail),
        pass_malformed_events=_flag(entry, "pass_malformed_events", fail),
        propagate_trace=_flag(entry, "propagate_trace", fail),
    )


class _Fail(Protocol):
    def __call__(self, field_name: str, why: str) -> AccountsFileError: ...


def _is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not parts.query


_MODEL_FIELDS = frozenset(
    {"served", "context_window", "context_fallback", "prices", *_LIMIT_FIELDS}
)


@dataclass(frozen=True, slots=True)
class _Models:
    """One account's `models:`, read once: requested name -> each declared fact."""

    served: dict[str, str] = field(default_factory=dict)
    windows: dict[str, int] = field(default_factory=dict)
    fallbacks: dict[str, str] = field(default_factory=dict)
    prices: dict[str, Prices] = field(default_factory=dict)
    limits: dict[str, DeclaredLimits] = field(default_factory=dict)


def _parse_models(raw: object, fail: _Fail) -> _Models:
    """`models`: a list of names, or a mapping of requested name -> served name, or ->
    `{served, context_window, context_fallback, prices}` (all optional; served defaults to the
    requested name)."""
    if isinstance(raw, list):
        pairs: list[tuple[object, object]] = [(m, m) for m in raw]
    elif isinstance(raw, Mapping):
        pairs = list(raw.items())
    else:
        raise fail("models", "must be a mapping of requested -> served names, or a list")
    if not pairs:
        raise fail("models", "must name at least one model")
    specs = _Models()
    for requested, value in pairs:
        if not isinstance(requested, str) or not requested:
            raise fail("models", "model names must be non-empty strings")
        served: object = value
        if isinstance(value, Mapping):
            served = _model_entry(requested, value, specs, fail)
        if not isinstance(served, str) or not served:
            raise fail("models", "model names must be non-empty strings")
        if requested in specs.served:
            raise fail("models", f"model {requested!r} is listed twice")
        specs.served[requested] = served
    return specs


def _model_entry(
    requested: str, entry: Mapping[object, object], specs: _Models, fail: _Fail
) -> object:
    """One model's mapping form: records its window, fallback and prices; returns the served
    name."""
    unknown = sorted(str(k) for k in entry if k not in _MODEL_FIELDS)
    if unknown:
        raise fail("models", f"model {requested!r}: unknown field {unknown[0]!r}")
    window = entry.get("context_window")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise fail("models", f"model {requested!r}: context_window must be a positive integer")
        specs.windows[requested] = window
    fallback = entry.get("context_fallback")
    if fallback is not None:
        if not isinstance(fallback, str) or fallback in ("", requested):
            raise fail("models", f"model {requested!r}: context_fallback must name another model")
        specs.fallbacks[requested] = fallback
    if (limits := _declared_limits(requested, entry, fail)) is not None:
        specs.limits[requested] = limits
    if entry.get("prices") is not None:
        try:
            specs.prices[requested] = parse_prices(entry["prices"])
        except ValueError as exc:
            raise fail("models", f"model {requested!r}: {exc}") from None
    return entry.get("served", requested)


def _declared_limits(
    requested: str, entry: Mapping[object, object], fail: _Fail
) -> DeclaredLimits | None:
    """A model entry's declared limits; None when it declares none."""
    counts: dict[str, int] = {}
    for name in _LIMIT_FIELDS:
        raw = entry.get(name)
        if raw is None:
            continue
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise fail("models", f"model {requested!r}: {name} must be a positive integer")
        if name == "burst_s" and raw > 60:
            raise fail("models", f"model {requested!r}: burst_s must be at most 60 (a minute)")
        counts[name] = raw
    return DeclaredLimits(**counts) if counts else None


def _capacity(raw: object, field_name: str, fail: _Fail) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise fail(field_name, "must be null or a non-negative integer")
    return raw


def _positive(raw: object, field_name: str, fail: _Fail) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise fail(field_name, "must be null or a positive integer")
    return raw


def _flag(entry: Mapping[object, object], field_name: str, fail: _Fail) -> bool:
    raw = entry.get(field_name)
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise fail(field_name, "must be true or false")
    return raw


def _seconds(raw: object, field_name: str, fail: _Fail) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        raise fail(field_name, "must be null or a positive number of seconds")
    return float(raw)
