"""Context-length errors in each provider's shape: recognised from the error payload alone,
classified `context-length-exceeded` (model scope on the row, no health failure, not
qualifying for an ordinary hop), and never confused with other 400s."""

from __future__ import annotations

import json

import pytest

from leasegate.core.observation import Classification
from leasegate.providers import wire_named
from leasegate.providers.common import (
    anthropic_context_length,
    context_length_exceeded,
    openai_context_length,
    openrouter_context_length,
)
from leasegate.routing.classify import classify
from leasegate.upstream.failures import response_observation

OPENAI_WIRE = wire_named("openai")

OPENAI = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "prompt is too long: 9001 tokens > 8192"},
}
OPENROUTER = {
    "error": {
        "code": 400,
        "message": "This endpoint's maximum context length is 8192 tokens. However, you "
        "requested about 9001 tokens (9001 of text input).",
    }
}
OTHERS = [
    {"error": {"type": "invalid_request_error", "code": "content_filter", "message": "no"}},
    {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: bad"}},
    {"error": {"code": 400, "message": "Invalid model"}},
    {"error": {"code": 429, "message": "maximum context length ... rate limited"}},
]


def test_each_provider_has_its_own_recognizer() -> None:
    assert openai_context_length(OPENAI)
    assert anthropic_context_length(ANTHROPIC)
    assert openrouter_context_length(OPENROUTER)
    assert not openai_context_length(ANTHROPIC)
    assert not anthropic_context_length(OPENROUTER)
    assert not openrouter_context_length(OPENAI)


@pytest.mark.parametrize("payload", [OPENAI, ANTHROPIC, OPENROUTER], ids=["oa", "an", "or"])
def test_a_context_length_400_is_its_own_class(payload: dict[str, object]) -> None:
    observation = response_observation(400, {}, json.dumps(payload).encode(), wire=OPENAI_WIRE)
    assert observation.context_length
    got = classify(observation)
    assert got == Classification(
        "context-length-exceeded", "model", False, "context_length_exceeded"
    )
    assert got.health_scope is None  # no health failure


@pytest.mark.parametrize("payload", OTHERS)
def test_other_errors_are_not_context_length(payload: dict[str, object]) -> None:
    assert not context_length_exceeded(payload)
    assert classify(
        response_observation(400, {}, json.dumps(payload).encode(), wire=OPENAI_WIRE)
    ).outcome == ("upstream-error")


def test_a_5xx_is_never_read_as_context_length() -> None:
    observation = response_observation(500, {}, json.dumps(OPENAI).encode(), wire=OPENAI_WIRE)
    assert not observation.context_length
    assert classify(observation).health_scope == "model"
