"""Turn the environment into one validated Config, or one line saying what is wrong."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import yaml
from pydantic import SecretStr, ValidationError

from leasegate.accounts import AccountsFileError, Registry, parse_accounts
from leasegate.config.settings import Settings


class ConfigError(Exception):
    """Start-up must stop; str() is one line naming the variable or account and field."""


@dataclass(frozen=True)
class Config:
    settings: Settings
    registry: Registry
    credentials: Mapping[str, SecretStr]
    """account id -> credential, for configured accounts only. Never logged."""
    unknown_variables: tuple[str, ...] = ()
    """LEASEGATE_* names that are neither a setting nor a credential: likely typos, warned of."""
    tracing_endpoint: str | None = None
    """OTEL_EXPORTER_OTLP_ENDPOINT, the OpenTelemetry standard variable: tracing is on if set."""


def load_config(
    env: Mapping[str, str] | None = None,
    *,
    defaults: Mapping[str, str] | None = None,
    **overrides: object,
) -> Config:
    """Read LEASEGATE_* from `env` (default: the process environment) plus explicit overrides.

    `defaults`: variables used only where the environment does not set them (the demo's)."""
    source = {**(defaults or {}), **(os.environ if env is None else env)}
    settings = _settings(source, overrides)
    registry = _registry(settings, source)
    credentials = {
        a.id: _credential(a.id, a.credential_env, source[a.credential_env])
        for a in registry.accounts
        if a.configured and a.credential_env  # none: signed from a cloud's chain
    }
    return Config(
        settings,
        registry,
        credentials,
        _unknown_variables(source),
        tracing_endpoint=source.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
    )


def _unknown_variables(env: Mapping[str, str]) -> tuple[str, ...]:
    known = {f"LEASEGATE_{name.upper()}" for name in Settings.model_fields}
    return tuple(
        sorted(
            name
            for name in env
            if name.startswith("LEASEGATE_")
            and not name.startswith("LEASEGATE_CRED_")
            and name not in known
        )
    )


def _settings(env: Mapping[str, str], overrides: Mapping[str, object]) -> Settings:
    values: dict[str, object] = {}
    for name in Settings.model_fields:
        variable = f"LEASEGATE_{name.upper()}"
        if variable in env:
            values[name] = env[variable]
    values.update(overrides)
    try:
        # model_validate reads only `values`: the environment was read above, once.
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _credential(account_id: str, variable: str, value: str) -> SecretStr:
    # It travels as a header value: refuse what no header can carry, naming never the value.
    if not value.isascii() or not value.isprintable() or value != value.strip() or " " in value:
        raise ConfigError(
            f"{variable}: the credential of account {account_id!r} must be printable ASCII "
            "with no spaces"
        )
    return SecretStr(value)


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    location = error.get("loc") or ()
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if location:
        return f"LEASEGATE_{str(location[0]).upper()}: {message}"
    return message


def _registry(settings: Settings, env: Mapping[str, str]) -> Registry:
    if settings.accounts_file is None:
        return Registry(())
    path = settings.accounts_file
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"LEASEGATE_ACCOUNTS_FILE: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"LEASEGATE_ACCOUNTS_FILE: {path} is not valid YAML{where}") from None
    configured = {
        name for name, value in env.items() if name.startswith("LEASEGATE_CRED_") and value
    }
    try:
        return parse_accounts(document, configured)
    except AccountsFileError as exc:
        raise ConfigError(str(exc)) from None
