"""What a wire's examples are, and the building blocks they are written with.

An example names the placeholder model `EXAMPLE_MODEL` (the demo upstream puts the request's
model, JSON-quoted, in place of the quoted placeholder) and reports `INPUT_TOKENS` input
tokens, `CACHED_TOKENS` of them cached, and one output token per content piece: what the
completeness test (tests/unit/providers/test_completeness.py) reads back through each kind.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass

from leasegate.providers import Endpoint

EXAMPLE_MODEL = "__mock_model__"
INPUT_TOKENS = 12
CACHED_TOKENS = 4
CREATED = 1_767_225_600
_WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")


@dataclass(frozen=True, slots=True)
class Example:
    """A typical answer with `EXAMPLE_MODEL` in it: a whole body, or a stream's events."""

    body: bytes | None
    chunks: tuple[bytes, ...] = ()


class WireExamples(ABC):
    """One wire's typical answers."""

    @abstractmethod
    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        """A typical answer on `endpoint` with `n` content pieces: a body, or (streamed) its
        SSE events."""

    @abstractmethod
    def error_body(self, status: int) -> bytes:
        """A typical error payload for `status` in this wire's shape."""

    @abstractmethod
    def error_event(self) -> bytes:
        """A typical in-stream error of the upstream itself (with `EXAMPLE_MODEL`, if any)."""


def dump(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def word(i: int) -> str:
    return _WORDS[i % len(_WORDS)]


def text(n: int) -> str:
    return "".join(word(i) for i in range(n))


def data(obj: object) -> bytes:
    return f"data: {dump(obj)}\n\n".encode()


def event(name: str, obj: object) -> bytes:
    return f"event: {name}\ndata: {dump(obj)}\n\n".encode()


_AUTH_ERRORS = {
    401: ("authentication_error", "invalid_api_key"),
    402: ("billing_error", "insufficient_credits"),
    403: ("permission_error", "permission_denied"),
}


def family_error_body(status: int) -> bytes:
    """An OpenAI-shaped error payload (the OpenAI/Anthropic family reads it); a 401, 402 or
    403 names its credential, billing or permission fault as the providers do."""
    type_, code = _AUTH_ERRORS.get(status, ("mock_error", f"http_{status}"))
    error = {"type": type_, "code": code, "message": f"mock status {status}"}
    return json.dumps({"error": error}).encode()
