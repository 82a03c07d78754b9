"""Every LEASEGATE_* variable, typed and checked. The only place the environment is read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from leasegate.config.redis_url import is_cluster_url, parse_cluster_url
from leasegate.providers import KINDS

DEFAULT_EVIDENCE_SPILL_PATH = Path("leasegate-spill")
"""The evidence spill directory of production mode when none is set: relative to the working
directory (`/tmp/leasegate-spill` in the image, whose working directory is `/tmp`)."""

_TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")

PositiveSeconds = Annotated[float, Field(gt=0)]


class TenantResidency(BaseModel):
    """One tenant's data residency (LEASEGATE_TENANT_RESIDENCY): the provider kinds and the
    regions its dispatches may be served from; a mint may only narrow it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_providers: tuple[str, ...] | None = Field(default=None, min_length=1)
    allowed_regions: tuple[str, ...] | None = Field(default=None, min_length=1)

    @field_validator("allowed_providers")
    @classmethod
    def _known_kinds(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        unknown = [name for name in value or () if name not in KINDS]
        if unknown:
            raise ValueError(f"unknown provider kind {unknown[0]!r} (one of: {', '.join(KINDS)})")
        return value


class Settings(BaseSettings):
    """Defaults give the embedded single-process mode; the two URLs give production mode."""

    model_config = SettingsConfigDict(
        env_prefix="LEASEGATE_", extra="forbid", frozen=True, validate_default=True
    )

    database_url: str = "sqlite+aiosqlite:///./leasegate.db"
    redis_url: str | None = None
    redis_prefix: str = Field(default="leasegate", pattern=r"^[A-Za-z0-9:_-]{1,64}$")
    """Namespace for every Redis key and channel, so one Redis can serve several gateways."""
    database_connect_timeout_s: PositiveSeconds = 3.0
    """Opening a Postgres connection."""
    database_command_timeout_s: PositiveSeconds = 5.0
    """One Postgres statement; past it the call fails and the request gets 503 `unavailable`."""
    database_pool_size: Annotated[int, Field(ge=1, le=1000)] = 16
    """Postgres connections per process for the hot paths (mint, renewal, revocation, key
    reads, evidence); every other read shares at most 10 more. A process holds at most
    `database_pool_size + 10` connections, opened as needed."""
    redis_connect_timeout_s: PositiveSeconds = 2.0
    """Opening a Redis connection."""
    redis_command_timeout_s: PositiveSeconds = 2.0
    """One Redis command's reply."""
    subscription_heartbeat_s: Annotated[float, Field(gt=0, le=10)] = 0.5
    """A PING on each Redis subscription (revocations, health news) this often; one that
    hears nothing for three of them is replaced (a revoked key is then refused within about
    three heartbeats and a second)."""
    accounts_file: Path | None = None
    control_token: SecretStr | None = None
    admin_tokens: Annotated[dict[str, SecretStr], NoDecode] = Field(default_factory=dict)
    audit_key: SecretStr | None = None
    max_fallback_hops: int = Field(default=1, ge=0)
    key_ttl_s: int = Field(default=900, gt=0)
    key_max_ttl_s: int = Field(default=86400, gt=0)
    affinity_ttl_s: PositiveSeconds = 300.0
    """A mint's `affinity` follows the account that last served it for this long."""
    fair_share_window_s: PositiveSeconds = 3.0
    """A tenant a full pool refused counts as waiting for its fair share this long."""
    tenant_shares: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    """Fair-share weights by tenant (JSON); a tenant not named weighs 1."""
    tenant_residency: dict[str, TenantResidency] = Field(default_factory=dict)
    """Data residency by tenant (JSON: {"t": {"allowed_providers": [...], "allowed_regions":
    [...]}}); a tenant not named may be served anywhere."""

    @field_validator("tenant_shares", "tenant_residency", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        """Read from the environment, these are JSON text."""
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except ValueError:
                raise ValueError("must be a JSON object") from None
        return value

    lease_rate_interval_s: PositiveSeconds = 10.0
    """How often the control plane measures what a live lease spends (adaptive ceilings)."""
    lease_spread_share: float = Field(default=0.8, gt=0, le=1)
    """Share of a pair's sustained lease ceiling filled before mints move on down the pool."""
    lease_probe_leases: int = Field(default=4, ge=1)
    """Live leases a pair nothing is known of takes before mints move on down the pool."""
    quota_probe_requests: int = Field(default=0, ge=0)
    """Requests one proxy sends at a time to an (account, model) nothing is known of yet,
    until its first answer's headers arrive (0, the default: not probed; a fresh pair takes
    requests up to its account's request slots)."""
    lease_prior_requests_per_s: float = Field(default=1.0, gt=0)
    """What a lease is assumed to send before any lease of its pool was measured."""
    failure_threshold: int = Field(default=3, ge=1)
    account_failure_threshold: int = Field(default=2, ge=1)
    base_cooldown_s: PositiveSeconds = 30.0
    max_cooldown_s: PositiveSeconds = 600.0
    cooldown_jitter: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Each cooldown window is shortened by base x a fraction drawn from [0, this)."""
    overload_cooldown_s: PositiveSeconds = 5.0
    """The base window of a provider's overload (Anthropic's 529): short, it passes."""
    upstream_headers_timeout_s: PositiveSeconds = 30.0
    first_token_timeout_s: PositiveSeconds = 120.0
    """Reasoning models send nothing that answers while they think: see upstream-failures.md."""
    stream_idle_timeout_s: PositiveSeconds = 60.0
    stream_usage_grace_s: Annotated[float, Field(ge=0, le=60)] = 5.0
    """How long a stream whose caller hung up after the answer ended is read on for its
    usage (OpenAI's comes after the finish); 0: not at all (the usage is then estimated)."""
    upstream_max_connections: int = Field(default=256, ge=1)
    """Default size of each account's own connection pool."""
    upstream_pool_timeout_s: PositiveSeconds = 5.0
    max_in_flight: int = Field(default=512, ge=0)
    """Proxied requests one proxy process works on at once (streams included); past it a new
    one is answered 503 `gateway-overloaded` with `Retry-After` at once. 0: no bound."""
    """How long a request waits for a pooled connection before `upstream-pool-exhausted`."""
    request_slot_lease_s: PositiveSeconds = 30.0
    """A request slot whose holder stops renewing is reclaimed after this long."""
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    header_read_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    """A request's headers must be complete this long after its first byte (or after the
    connection opened); then 408 and the connection is closed."""
    body_idle_timeout_s: Annotated[float, Field(gt=0, le=300)] = 30.0
    """A request body that stops arriving for this long is answered 408."""
    body_total_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    """A request body must be complete this long after the request's headers, however it
    trickles in; then 408 and the connection is closed."""
    max_forwarded_header_bytes: int = Field(default=8192, ge=256)
    """Cap on the caller headers the proxy forwards upstream, in total; over it: 431."""
    key_cache_ttl_s: PositiveSeconds = 60.0
    """How long a proxy trusts a cached key record; revocations arrive sooner by fan-out."""
    evidence_flush_interval_s: PositiveSeconds = 0.05
    evidence_linger_s: Annotated[float, Field(ge=0, le=5)] = 0.5
    """How long evidence rows may gather into one batch below saturation (proxy/evidence.py);
    0: each row opens a flush interval's window."""
    evidence_retention_days: int | None = Field(default=None, ge=1)
    """Evidence older than this many whole UTC days before today is removed by the control
    plane (whole partitions on Postgres); unset keeps it forever."""
    evidence_memory_rows: int = Field(default=100_000, ge=1)
    """Unwritten evidence rows held in memory; past this they go to the spill file."""
    evidence_spill_path: Path | Literal["off"] | None = None
    """Directory for the evidence spill files (`evidence_spill_dir`); `off`: none at all."""
    evidence_durable_timeout_s: PositiveSeconds = 2.0
    """How long a qualifying failure's row may hold its response while it is written."""
    spend_reconcile_interval_s: PositiveSeconds = 60.0
    """How often the control plane brings each running spend total back to evidence."""
    shutdown_drain_s: PositiveSeconds = 10.0
    log_level: str = Field(default="INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")
    console_secret: SecretStr | None = None
    """HMAC key of the console's session cookies; unset: a random key per process."""
    console_session_ttl_s: int = Field(default=8 * 3600, ge=60, le=7 * 86400)
    metrics_tenant_label: bool = False
    """Label mint metrics with the tenant (the first `METRICS_MAX_TENANTS`, then `other`)."""
    access_log: bool = True
    """One JSON line per HTTP request on stderr (leasegate.web.access_log)."""

    @field_validator("admin_tokens", mode="before")
    @classmethod
    def _parse_admin_tokens(cls, raw: object) -> object:
        if not isinstance(raw, str):
            return raw
        tokens: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in raw.split(","))):
            name, sep, token = item.partition("=")
            if not sep or not token:
                raise ValueError("expected name=token[,name2=token2]")
            if not _TOKEN_NAME.fullmatch(name):
                raise ValueError(f"bad token name {name!r}")
            if name in tokens:
                raise ValueError(f"token name {name!r} appears twice")
            tokens[name] = token
        return tokens

    @field_validator("console_secret")
    @classmethod
    def _long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value()) < 32:
            raise ValueError("must be at least 32 characters (e.g. `openssl rand -hex 32`)")
        return secret

    @field_validator("database_url")
    @classmethod
    def _known_driver(cls, url: str) -> str:
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return url

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str | None) -> str | None:
        if url is None:
            return url
        if is_cluster_url(url):
            parse_cluster_url(url)  # the seeds must parse now, not at the first connection
        elif not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "must start with redis://, rediss://, unix:// or (a cluster) redis+cluster://"
            )
        return url

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.key_ttl_s > self.key_max_ttl_s:
            raise ValueError("LEASEGATE_KEY_TTL_S must not exceed LEASEGATE_KEY_MAX_TTL_S")
        if self.base_cooldown_s > self.max_cooldown_s:
            raise ValueError("LEASEGATE_BASE_COOLDOWN_S must not exceed LEASEGATE_MAX_COOLDOWN_S")
        if self.overload_cooldown_s > self.max_cooldown_s:
            raise ValueError(
                "LEASEGATE_OVERLOAD_COOLDOWN_S must not exceed LEASEGATE_MAX_COOLDOWN_S"
            )
        return self

    @property
    def evidence_written_within_s(self) -> float:
        """The longest a finished request's row waits in the proxy's memory before its batch
        begins (a database that answers): what spend settlement waits for."""
        return self.evidence_flush_interval_s + 2 * self.evidence_linger_s

    @property
    def evidence_spill_dir(self) -> Path | None:
        """The evidence spill directory in use: the one set; unset, `DEFAULT_EVIDENCE_SPILL_PATH`
        in production mode and none in embedded mode; none when set to `off`."""
        if self.evidence_spill_path == "off":
            return None
        if self.evidence_spill_path is not None:
            return self.evidence_spill_path
        return DEFAULT_EVIDENCE_SPILL_PATH if self.production else None

    @property
    def production(self) -> bool:
        """Shared stores: separate control-plane and proxy processes are possible."""
        return self.redis_url is not None
