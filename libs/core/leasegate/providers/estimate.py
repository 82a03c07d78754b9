"""Usage the gateway estimates when a stream never reports its own (pure).

A stream that is cut, a provider that never reports usage, or a caller that hangs up before
the usage arrives (and it does not arrive within `LEASEGATE_STREAM_USAGE_GRACE_S`) would
otherwise record no tokens and no cost, and spend nothing against its budgets. Such a request
is charged an estimate instead, marked `usage_estimated` on its evidence row:

    input tokens  = ceil(request body bytes / CHARS_PER_TOKEN), at least 1
    output tokens = ceil(generated characters relayed / CHARS_PER_TOKEN)

`CHARS_PER_TOKEN` is 4, the usual figure for English text with OpenAI's and Anthropic's
tokenizers. The body's size counts its JSON as well as its text (keys, roles, quotes), so
the input side errs high, never low: an estimate is a charge, and an operator who bills on it
should not lose by it. The output side counts the characters of text the stream carried
(content, tool-call arguments, reasoning: the wire says which, `Wire.text_chars`).
"""

from __future__ import annotations

from leasegate.providers.base import Usage

CHARS_PER_TOKEN = 4


def tokens_for(chars: int) -> int:
    """Tokens for `chars` characters: rounded up, so any text is at least one token."""
    return -(-max(chars, 0) // CHARS_PER_TOKEN)


def estimated_usage(body_bytes: int, text_chars: int) -> Usage:
    """The estimate for a request of `body_bytes` whose answer carried `text_chars`."""
    return Usage(
        input_tokens=max(1, tokens_for(body_bytes)),
        output_tokens=tokens_for(text_chars),
        estimated=True,
    )


def settled_usage(reported: Usage, body_bytes: int, text_chars: int) -> Usage:
    """What a finished stream is charged: the usage it reported, or, when it reported no
    input and no output count at all, the estimate. Never zero tokens."""
    if reported.reported:
        return reported
    return estimated_usage(body_bytes, text_chars)
