"""OpenAI and the kinds that speak its wire as it is: `openai`, `openrouter`,
`openai-compatible`.

Endpoints: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings` (the chat wire,
defined here) and `/v1/responses` (leasegate.providers.responses), sent to the same path under
the account's base URL. The credential goes as `Authorization: Bearer`.

The chat wire: usage is the body's `usage` (`prompt_tokens`, `completion_tokens`,
`prompt_tokens_details.cached_tokens`, cached tokens counted inside the input); a stream ends
with a non-null `finish_reason` or `data: [DONE]`, and fails with an `error` object in a data
event (OpenRouter's mid-stream refusal) or an `event: error`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.providers import responses
from leasegate.providers.base import (
    Endpoint,
    KeyHeader,
    OptionError,
    ProviderKind,
    StreamFacts,
    Usage,
    Wire,
)
from leasegate.providers.common import (
    ANSWER_HEADERS,
    COMMON_ERRORS,
    SDK_HEADERS,
    FamilyErrors,
    ModelInBody,
    error_fields_of,
    openai_family_usage,
)
from leasegate.providers.ratelimits import openai_buckets


def openai_usage(usage: Mapping[str, object]) -> Usage:
    return openai_family_usage(
        usage,
        input_key="prompt_tokens",
        output_key="completion_tokens",
        details_key="prompt_tokens_details",
    )


class ChatWire(FamilyErrors, Wire):
    name = "openai"
    gate = re.compile(rb'"(?:error|finish_reason|usage)"(?!\s*:\s*null)')
    done_completes = True
    counts_text = True

    def ask_usage(self, body: dict[str, Any]) -> bool:
        """A stream reports its usage only when `stream_options.include_usage` is true: set
        it when the caller did not (absent, or false). A `stream_options` that is not an
        object is the caller's error and left for the upstream to refuse."""
        options = body.get("stream_options")
        if options is None:
            body["stream_options"] = {"include_usage": True}
            return True
        if isinstance(options, dict) and options.get("include_usage") is not True:
            body["stream_options"] = {**options, "include_usage": True}
            return True
        return False

    def usage_only(self, obj: Mapping[str, object]) -> bool:
        """The chunk `include_usage` adds: `usage` with empty (or no) `choices`, which
        breaks the common `chunk.choices[0]` of a caller that never asked for it."""
        if obj.get("error") is not None or not isinstance(obj.get("usage"), dict):
            return False
        choices = obj.get("choices")
        return choices is None or choices == []

    def text_chars(self, obj: Mapping[str, object]) -> int:
        choices = obj.get("choices")
        if type(choices) is not list:
            return 0
        if len(choices) == 1 and type(choice := choices[0]) is dict:
            # the common event, first and cheaply: one choice whose delta is only content
            delta = choice.get("delta")
            if type(delta) is dict and len(delta) == 1:
                text = delta.get("content")
                if type(text) is str:
                    return len(text)
        n = 0
        for choice in choices:
            if type(choice) is not dict:
                continue
            delta = choice.get("delta")
            if type(delta) is not dict:  # a legacy completion's `text`
                text = choice.get("text")
                n += len(text) if type(text) is str else 0
                continue
            for name, value in delta.items():
                if type(value) is str:
                    n += len(value) if name in _TEXT_FIELDS else 0
                elif name == "tool_calls" and type(value) is list:
                    n += _arguments_chars(value)
        return n

    def usage(self, body: Mapping[str, object]) -> Usage:
        usage = body.get("usage")
        return openai_usage(usage) if isinstance(usage, dict) else Usage()

    def read_event(self, facts: StreamFacts, event: bytes, obj: dict[str, object]) -> None:
        if obj.get("error") is not None:
            facts.record_error(*error_fields_of(obj))
        if not facts.completed and _has_finish_reason(obj):
            facts.completed = True
        usage = obj.get("usage")
        if isinstance(usage, dict):
            facts.usage = openai_usage(usage)

    def error_event(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        error = {"type": error_type, "code": code, "message": message, "param": None}
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


_TEXT_FIELDS = frozenset({"content", "refusal", "reasoning", "reasoning_content"})
"""A chat delta's generated text: the answer, a refusal, and the reasoning some OpenAI-
compatible servers (vLLM, OpenRouter) stream beside it."""


def _arguments_chars(calls: list[object]) -> int:
    n = 0
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        n += len(arguments) if isinstance(arguments, str) else 0
    return n


def _has_finish_reason(obj: dict[str, object]) -> bool:
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") is not None for c in choices)


WIRE = ChatWire()
CHAT = Endpoint("/v1/chat/completions", WIRE)
COMPLETIONS = Endpoint("/v1/completions", WIRE)
EMBEDDINGS = Endpoint("/v1/embeddings", WIRE, streams=False)

BEARER = KeyHeader("authorization", "bearer")
"""How OpenAI's SDKs present a key (and so its callers' key to the gateway)."""


class OpenAI(ModelInBody, ProviderKind):
    name = "openai"
    endpoints = (CHAT, COMPLETIONS, EMBEDDINGS, responses.RESPONSES)
    errors = COMMON_ERRORS
    caller_key_headers = (BEARER,)
    forwarded_headers = SDK_HEADERS | {"openai-beta"}
    relayed_headers = (*ANSWER_HEADERS, "x-request-id", "openai-processing-ms")
    input_includes_cache = True

    def quota_buckets(
        self, headers: Mapping[str, str], now: float
    ) -> Mapping[QuotaDimension, Bucket]:
        return openai_buckets(headers, now)

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", "Bearer " + secret),)

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()


class OpenRouter(OpenAI):
    """OpenRouter (`https://openrouter.ai/api`): OpenAI's wire, numeric error codes."""

    name = "openrouter"
    forwarded_headers = OpenAI.forwarded_headers | {"http-referer", "x-title"}  # attribution


class OpenAICompatible(OpenAI):
    """Any server that speaks OpenAI's wire (vLLM, llama.cpp, LiteLLM, ...).

    `ask_stream_usage: false` on the account: a server that refuses `stream_options` is not
    asked for a stream's usage; its streams are charged an estimate (providers/estimate.py)."""

    name = "openai-compatible"
    option_fields = frozenset({"ask_stream_usage"})

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        ask = entry.get("ask_stream_usage", True)
        if not isinstance(ask, bool):
            raise OptionError("ask_stream_usage", "must be true or false")
        return {} if ask else {"ask_stream_usage": "false"}

    def ask_usage(
        self, endpoint: Endpoint, body: dict[str, Any], options: Mapping[str, str]
    ) -> bool:
        if options.get("ask_stream_usage") == "false":
            return False
        return super().ask_usage(endpoint, body, options)
