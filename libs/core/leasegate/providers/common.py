"""What the OpenAI-shaped family shares: error payloads, their vocabulary, and context-length
recognizers.

OpenAI, OpenRouter, OpenAI-compatible servers (vLLM, ...) and Anthropic name their errors in
one of a few related shapes, and an OpenAI-compatible upstream may answer in any of them, so
the kinds of this family read every shape and share one vocabulary (`COMMON_ERRORS`).

Only short identifiers leave this module (`type`, `code`, a yes/no); an error's message text
never does, so nothing a provider echoes back from a prompt can end up in an evidence row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    UpstreamRoute,
    Usage,
    count,
    exact_route,
    identifier,
)

SDK_HEADERS = frozenset({"content-type", "accept", "user-agent"})
"""Caller headers any SDK sends that an upstream may read; a kind names them in its own
`forwarded_headers` (or fewer of them) beside its provider's own."""

ANSWER_HEADERS = ("content-type", "retry-after", "retry-after-ms")
"""Answer headers any provider's caller reads; a kind names them in its own
`relayed_headers` beside its provider's request id."""

COMMON_ERRORS = ErrorVocabulary(
    account=frozenset(
        {
            # OpenAI
            "insufficient_quota",
            "billing_hard_limit_reached",
            "billing_not_active",
            "invalid_api_key",
            "account_deactivated",
            "access_terminated",
            "unsupported_country_region_territory",
            # Anthropic error types
            "billing_error",
            "authentication_error",
            "permission_error",
            # OpenRouter and OpenAI-compatible servers
            "insufficient_credits",
            "payment_required",
        }
    ),
    model_not_found=frozenset(
        {"model_not_found", "model_not_available", "not_found_error", "notfounderror"}
    ),
    overloaded=frozenset({"overloaded_error"}),
    rate_limited=frozenset(
        {
            # OpenAI: code `rate_limit_exceeded`, type `requests` or `tokens`
            "rate_limit_exceeded",
            "requests",
            "tokens",
            # Anthropic
            "rate_limit_error",
            # OpenAI-compatible servers (vLLM, LiteLLM, ...)
            "rate_limited",
            "too_many_requests",
        }
    ),
)
"""OpenAI puts `insufficient_quota` in both `type` and `code` of a 429 and `model_not_found` in
the code of a 404; a rate limit is a 429 with code `rate_limit_exceeded` (type `requests` or
`tokens`). Anthropic names the class in `type` (`authentication_error`,
`permission_error`, `billing_error`, `not_found_error`, `overloaded_error` as a 529 or an
`event: error`). OpenRouter's `code` is numeric and echoes an HTTP status."""


def error_fields_of(obj: Mapping[str, object]) -> tuple[str | None, str | None]:
    """(type, code) of an error payload or event, in any of the family's shapes.

    OpenAI `{"error": {type, code}}`, OpenRouter `{"error": {"code": 429}}`, Anthropic
    `{"type": "error", "error": {"type": ...}}`, the responses API's `{"type": "error",
    "code": ...}` and vLLM-style `{"object": "error", "type": ..., "code": ...}`.
    """
    error = obj.get("error")
    if isinstance(error, dict):
        return identifier(error.get("type")), identifier(error.get("code"))
    if obj.get("object") == "error":
        return identifier(obj.get("type")), identifier(obj.get("code"))
    if obj.get("type") == "error":
        return None, identifier(obj.get("code"))
    return None, None


# Context length. One recognizer per provider, each a pure function of the parsed error
# object; where a provider has no code for it, a fixed phrase of its message is matched (the
# message itself is never kept):
#     OpenAI       400, error.code "context_length_exceeded"
#     Anthropic    400, error.type "invalid_request_error", message "prompt is too long: ..."
#     OpenRouter   400, numeric error.code 400, message "This endpoint's maximum context
#                  length is N tokens. However, you requested about M tokens..."

_OPENAI_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


def error_of(obj: Mapping[str, object]) -> Mapping[str, object] | None:
    error = obj.get("error")
    return error if isinstance(error, Mapping) else None


def message_of(error: Mapping[str, object]) -> str:
    message = error.get("message")
    return message.lower() if isinstance(message, str) else ""


def openai_context_length(obj: Mapping[str, object]) -> bool:
    error = error_of(obj)
    return error is not None and error.get("code") in _OPENAI_CODES


def anthropic_context_length(obj: Mapping[str, object]) -> bool:
    error = error_of(obj)
    if error is None or error.get("type") != "invalid_request_error":
        return False
    return message_of(error).startswith("prompt is too long")


def openrouter_context_length(obj: Mapping[str, object]) -> bool:
    error = error_of(obj)
    if error is None or error.get("code") not in (400, "400"):
        return False
    return "maximum context length" in message_of(error)


def context_length_exceeded(obj: Mapping[str, object]) -> bool:
    """Any shape of the family (an account's kind does not fix the shape: an OpenAI-compatible
    upstream may answer in any of them)."""
    return (
        openai_context_length(obj)
        or anthropic_context_length(obj)
        or openrouter_context_length(obj)
    )


def openai_family_usage(
    usage: Mapping[str, object], *, input_key: str, output_key: str, details_key: str
) -> Usage:
    """A usage object of OpenAI's APIs: the chat and the responses API count the same three
    things under their own names, the cached part of the input inside a details object."""
    details = usage.get(details_key)
    return Usage(
        input_tokens=count(usage.get(input_key)),
        output_tokens=count(usage.get(output_key)),
        cache_read_input_tokens=(
            count(details.get("cached_tokens")) if isinstance(details, dict) else None
        ),
    )


class FamilyErrors:
    """The error reading of every wire of the OpenAI/Anthropic family (a `Wire` mixin, listed
    before `Wire`): an account's kind does not fix the shape an upstream answers in."""

    def error_fields(self, obj: Mapping[str, object]) -> tuple[str | None, str | None]:
        return error_fields_of(obj)

    def context_length(self, obj: Mapping[str, object]) -> bool:
        return context_length_exceeded(obj)


class ModelInBody:
    """The routing of a kind whose requests name the served model in the body (OpenAI and its
    compatibles, Anthropic): a `ProviderKind` mixin, listed before `ProviderKind`. No options
    of its own, any served name, and the caller's path sent unchanged."""

    endpoints: ClassVar[tuple[Endpoint, ...]]

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        return {}

    def served_problem(self, served_model: str) -> str | None:
        return None  # the served name travels in the body

    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        return endpoint.path

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        return exact_route(self.endpoints, path)
