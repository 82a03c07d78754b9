"""Accounts on the wire: registry order, configuration, health, both capacity counts, and
today's spend; with the audit chain's revision the view was folded from. And an operator's
change of an account's admin state (`StateBody`)."""

from __future__ import annotations

from typing import Literal

from leasegate.core.records import AdminState
from leasegate.core.vocab import ChainStatus
from leasegate.wire.audit import AuditedBody, AuditRecordView
from leasegate.wire.base import Money, Time, WireModel


class Cooling(WireModel):
    model: str
    """The served model name."""
    until: Time
    reason: str | None
    trips: int


class Circuit(WireModel):
    open: bool
    until: Time | None
    reason: str | None


class QuotaBucket(WireModel):
    dimension: Literal["requests", "tokens", "input-tokens", "output-tokens"]
    limit: int | None
    """The most the bucket holds; null when the provider did not say."""
    remaining: int | None
    """What it holds now (modelled: buckets refill continuously), rounded down; null when
    unknown (never stated, or stated too long ago to be believed)."""
    reset: Time | None
    """When the provider said it is full again; null when it did not say."""


class ModelQuota(WireModel):
    """What the gateway has learned of one served model's quota on the account."""

    model: str
    """The served model name."""
    source: Literal["headers", "declared"]
    """`headers`: the provider's answers (or a rate-limit 429) said so; `declared`: the
    accounts file's `rpm`/`tpm`/... (what the proxies send is counted by each proxy)."""
    observed_at: Time | None
    """When the provider said it; null for declared limits."""
    buckets: tuple[QuotaBucket, ...]


class SpendToday(WireModel):
    """Since midnight UTC, in the accounts file's currency (refreshed every 30 s at most)."""

    requests: int
    input_tokens: int
    output_tokens: int
    cost: Money | None


class Account(WireModel):
    id: str
    provider: str
    configured: bool
    admin_state: AdminState | Literal["unknown"]
    """`unknown` while the audit chain does not verify: no state can be vouched for."""
    health: Literal["healthy", "cooling", "circuit-open"]
    cooling_models: tuple[Cooling, ...]
    circuit: Circuit
    leases_held: int
    lease_capacity: int | None
    requests_in_flight: int | None
    """null for an account with no request ceiling: the proxy does not count those."""
    request_capacity: int | None
    spend_today: SpendToday
    quota: tuple[ModelQuota, ...] = ()
    """Per served model with anything learned or declared, in the account's model order."""


class Accounts(WireModel):
    """`GET /accounts`: every account in registry order."""

    accounts: tuple[Account, ...]
    revision: int
    """The audit chain's length: the `expected_revision` of the next state change."""
    chain: ChainStatus

    def get(self, account_id: str) -> Account | None:
        return next((a for a in self.accounts if a.id == account_id), None)


class AccountRead(Account):
    """`GET /accounts/{id}`: one account, with the chain's revision and status."""

    revision: int
    chain: ChainStatus


class AccountStateChanged(AccountRead):
    """`POST /accounts/{id}/state`: the account as it is now, and the record appended."""

    revoked_keys: int
    record: AuditRecordView


class StateBody(AuditedBody):
    state: Literal["enabled", "disabled", "draining"]
