"""What the providers' JSON says: token usage and error identifiers, in three dialects.

Only short identifiers leave this module (`type`, `code`); an error's message text never does,
so nothing a provider echoes back from a prompt can end up in an evidence row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import orjson

Dialect = Literal["openai", "anthropic", "responses"]
"""openai: /v1/chat/completions, /v1/completions, /v1/embeddings; responses: /v1/responses;
anthropic: /v1/messages."""

_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; None where it reported nothing."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class StreamError:
    """The first error event of a stream: identifiers only, never the message."""

    type: str | None
    code: str | None


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _nested(usage: Mapping[str, object], details: str, key: str) -> int | None:
    inner = usage.get(details)
    return _count(inner.get(key)) if isinstance(inner, dict) else None


def openai_usage(usage: Mapping[str, object]) -> Usage:
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        cache_read_input_tokens=_nested(usage, "prompt_tokens_details", "cached_tokens"),
    )


def responses_usage(usage: Mapping[str, object]) -> Usage:
    return Usage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_input_tokens=_nested(usage, "input_tokens_details", "cached_tokens"),
    )


def anthropic_usage(usage: Mapping[str, object]) -> Usage:
    return Usage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_input_tokens=_count(usage.get("cache_read_input_tokens")),
        cache_creation_input_tokens=_count(usage.get("cache_creation_input_tokens")),
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


_USAGE_READERS = {
    "openai": openai_usage,
    "responses": responses_usage,
    "anthropic": anthropic_usage,
}


def usage_from_body(dialect: Dialect, body: bytes) -> Usage:
    """Usage of a non-streaming JSON response; empty when the body says nothing usable."""
    try:
        obj = orjson.loads(body)  # depth-limited in C: no RecursionError to fear
    except orjson.JSONDecodeError:
        return Usage()
    usage = obj.get("usage") if isinstance(obj, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    return _USAGE_READERS[dialect](usage)


def identifier(value: object) -> str | None:
    """A provider's error type or code, if it looks like one (numeric codes become strings).

    Anything else (free text, nested objects) is dropped: it could carry prompt text.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
        return value
    return None


def error_fields_of(obj: Mapping[str, object]) -> tuple[str | None, str | None]:
    """(type, code) of an error payload or event, in any of the shapes providers use.

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
