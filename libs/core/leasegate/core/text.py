"""Strings a caller (or an upstream) controls, made safe to store.

A stored string must fit its column and be encodable by every driver: Postgres refuses NUL in
`text`, and UTF-8 cannot encode a lone surrogate (`"\\ud800"`, which JSON happily decodes).
`text_problem` says why a value cannot be accepted as given (for a 400 that names the field,
never the value); `safe_text` turns any value into one that can always be written.
"""

from __future__ import annotations

import re

MODEL_NAME_MAX = 200
"""The longest model name either service accepts (the mint body and the proxy body alike)."""

_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
REPLACEMENT = "\ufffd"


def text_problem(value: str, max_len: int) -> str | None:
    """Why `value` cannot be taken as given, or None when it can: too long, a control
    character (NUL included), or a lone surrogate."""
    if len(value) > max_len:
        return f"is longer than {max_len} characters"
    if _CONTROL.search(value):
        return "contains a control character"
    if _UNSTORABLE.search(value):
        return "is not valid Unicode (lone surrogate)"
    return None


def safe_text(value: str, max_len: int | None = None) -> str:
    """`value` with NUL and lone surrogates replaced by U+FFFD, cut to `max_len` characters."""
    cleaned = _UNSTORABLE.sub(REPLACEMENT, value)
    if max_len is not None and len(cleaned) > max_len:
        cleaned = cleaned[:max_len]
    return cleaned


def safe_optional(value: str | None, max_len: int | None = None) -> str | None:
    return None if value is None else safe_text(value, max_len)
