"""The proxied endpoints and which provider dialect each one speaks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leasegate.accounts import Account

Dialect = Literal["openai", "responses", "anthropic"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    dialect: Dialect
    streams: bool = True
    completion: bool = True
    """False for a call that produces no completion (token counting): its outcome is
    recorded as evidence but never fed to the health store."""

    def served_by(self, account: Account) -> bool:
        return (self.dialect == "anthropic") == account.speaks_anthropic


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/v1/chat/completions", "openai"),
    Endpoint("/v1/completions", "openai"),
    Endpoint("/v1/embeddings", "openai", streams=False),
    Endpoint("/v1/responses", "responses"),
    Endpoint("/v1/messages", "anthropic"),
    Endpoint("/v1/messages/count_tokens", "anthropic", streams=False, completion=False),
)
