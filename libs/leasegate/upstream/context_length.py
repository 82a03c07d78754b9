"""Does an upstream's error payload say the request exceeded the model's context window?

One recognizer per provider, each a pure function of the parsed error object (`{"error":
{...}}` or Anthropic's `{"type": "error", "error": {...}}`). They read the error's own
identifiers and, where a provider has no code for it, a fixed phrase of its error message;
the message itself is never kept, logged or stored: only the yes/no leaves this module.

    OpenAI       400, error.code "context_length_exceeded" (message "This model's maximum
                 context length is N tokens...")
    Anthropic    400, error.type "invalid_request_error", message "prompt is too long: N tokens
                 > M maximum" (no code)
    OpenRouter   400, numeric error.code 400, message "This endpoint's maximum context length
                 is N tokens. However, you requested about M tokens..."
"""

from __future__ import annotations

from collections.abc import Mapping

_OPENAI_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


def _error_of(obj: Mapping[str, object]) -> Mapping[str, object] | None:
    error = obj.get("error")
    return error if isinstance(error, Mapping) else None


def _message(error: Mapping[str, object]) -> str:
    message = error.get("message")
    return message.lower() if isinstance(message, str) else ""


def openai_context_length(obj: Mapping[str, object]) -> bool:
    error = _error_of(obj)
    return error is not None and error.get("code") in _OPENAI_CODES


def anthropic_context_length(obj: Mapping[str, object]) -> bool:
    error = _error_of(obj)
    if error is None or error.get("type") != "invalid_request_error":
        return False
    return _message(error).startswith("prompt is too long")


def openrouter_context_length(obj: Mapping[str, object]) -> bool:
    error = _error_of(obj)
    if error is None or error.get("code") not in (400, "400"):
        return False
    return "maximum context length" in _message(error)


def context_length_exceeded(obj: Mapping[str, object]) -> bool:
    """Any provider's shape (an account's provider does not fix the shape: an OpenAI-
    compatible upstream may answer in any of them)."""
    return (
        openai_context_length(obj)
        or anthropic_context_length(obj)
        or openrouter_context_length(obj)
    )
