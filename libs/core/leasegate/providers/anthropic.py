"""Anthropic's Messages API: the `anthropic` kind and its wire.

Endpoints: `/v1/messages` and `/v1/messages/count_tokens` (no completion: never fed to
health). The credential goes as `x-api-key`, with `anthropic-version` when the caller sent
none. Usage is reported in two steps in a stream (`message_start`, then `message_delta`; the
later wins), cached tokens beside the input; a stream ends with `message_stop` (`[DONE]` is
not Anthropic's) and fails with `event: error` (e.g. `overloaded_error`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.providers.base import (
    Endpoint,
    KeyHeader,
    ProviderKind,
    StreamFacts,
    Usage,
    Wire,
    count,
)
from leasegate.providers.common import (
    ANSWER_HEADERS,
    COMMON_ERRORS,
    SDK_HEADERS,
    FamilyErrors,
    ModelInBody,
    error_fields_of,
)
from leasegate.providers.ratelimits import anthropic_buckets

ANTHROPIC_VERSION = "2023-06-01"


def anthropic_usage(usage: Mapping[str, object]) -> Usage:
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        cache_read_input_tokens=count(usage.get("cache_read_input_tokens")),
        cache_creation_input_tokens=count(usage.get("cache_creation_input_tokens")),
    )


def merge_usage(earlier: Usage, later: Usage) -> Usage:
    """Anthropic reports in two steps (message_start, then message_delta): later wins."""
    return Usage(
        input_tokens=_first(later.input_tokens, earlier.input_tokens),
        output_tokens=_first(later.output_tokens, earlier.output_tokens),
        cache_read_input_tokens=_first(
            later.cache_read_input_tokens, earlier.cache_read_input_tokens
        ),
        cache_creation_input_tokens=_first(
            later.cache_creation_input_tokens, earlier.cache_creation_input_tokens
        ),
    )


def _first(a: int | None, b: int | None) -> int | None:
    return a if a is not None else b


class MessagesWire(FamilyErrors, Wire):
    name = "anthropic"
    done_completes = False  # `message_stop` ends it
    gate = re.compile(rb'"(?:error|message_start|message_delta|message_stop)"')
    preamble_events = frozenset({b"message_start", b"content_block_start", b"ping"})

    def usage(self, body: Mapping[str, object]) -> Usage:
        usage = body.get("usage")
        return anthropic_usage(usage) if isinstance(usage, dict) else Usage()

    def read_event(self, facts: StreamFacts, event: bytes, obj: dict[str, object]) -> None:
        kind = obj.get("type")
        if kind == "error":
            facts.record_error(*error_fields_of(obj))
        elif kind == "message_start":
            message = obj.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                facts.usage = merge_usage(facts.usage, anthropic_usage(usage))
        elif kind == "message_delta":
            usage = obj.get("usage")
            if isinstance(usage, dict):
                facts.usage = merge_usage(facts.usage, anthropic_usage(usage))
        elif kind == "message_stop":
            facts.completed = True

    def error_event(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        body = {"type": "error", "error": {"type": error_type, "code": code, "message": message}}
        return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"


WIRE = MessagesWire()
MESSAGES = Endpoint("/v1/messages", WIRE)
COUNT_TOKENS = Endpoint("/v1/messages/count_tokens", WIRE, streams=False, completion=False)

X_API_KEY = KeyHeader("x-api-key")
"""How Anthropic's SDKs present a key."""


class Anthropic(ModelInBody, ProviderKind):
    name = "anthropic"
    caller_key_headers = (X_API_KEY,)
    forwarded_headers = SDK_HEADERS | {"anthropic-version", "anthropic-beta"}
    relayed_headers = (*ANSWER_HEADERS, "request-id")
    endpoints = (MESSAGES, COUNT_TOKENS)
    errors = COMMON_ERRORS
    input_includes_cache = False

    def quota_buckets(
        self, headers: Mapping[str, str], now: float
    ) -> Mapping[QuotaDimension, Bucket]:
        return anthropic_buckets(headers, now)

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("x-api-key", secret),)

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return (("anthropic-version", ANTHROPIC_VERSION),)


def betas_into_body(
    fields: MutableMapping[str, Any], caller_headers: Sequence[tuple[str, str]]
) -> None:
    """For Claude on a cloud (Bedrock, Vertex AI), which takes Anthropic's beta flags in the
    body: the caller's `anthropic-beta` header values as `anthropic_beta`, unless the body
    already names some."""
    betas = [
        beta.strip()
        for name, value in caller_headers
        if name.lower() == "anthropic-beta"
        for beta in value.split(",")
        if beta.strip()
    ]
    if betas and "anthropic_beta" not in fields:
        fields["anthropic_beta"] = betas
