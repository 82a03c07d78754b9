"""Google's Gemini wire: a `generateContent` answer, a token count, the stream of partial
answers (usage on every chunk, the last with `finishReason`), Google's error shape."""

from __future__ import annotations

import json

from leasegate.demo.wires.base import (
    CACHED_TOKENS,
    EXAMPLE_MODEL,
    INPUT_TOKENS,
    Example,
    WireExamples,
    data,
    dump,
    text,
    word,
)
from leasegate.providers import Endpoint
from leasegate.providers.gemini import COUNT_TOKENS, STREAM_GENERATE

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""Google's status name of an HTTP status (google.rpc.Code)."""


def google_error_body(status: int) -> bytes:
    """An error payload in Google's shape (Gemini's API and Vertex AI's own errors)."""
    error = {
        "code": status,
        "message": f"mock status {status}",
        "status": STATUSES.get(status, "UNKNOWN"),
    }
    return json.dumps({"error": error}).encode()


class GeminiExamples(WireExamples):
    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        if endpoint is COUNT_TOKENS:
            return Example(dump({"totalTokens": INPUT_TOKENS}).encode())
        if endpoint is STREAM_GENERATE:
            return Example(None, tuple(_stream(n)))
        return Example(dump(_answer(text(n), "STOP", _meta(n))).encode())

    def error_body(self, status: int) -> bytes:
        return google_error_body(status)

    def error_event(self) -> bytes:
        error = {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
        return data({"error": error})


GEMINI_EXAMPLES = GeminiExamples()


def _meta(n: int) -> dict[str, object]:
    return {
        "promptTokenCount": INPUT_TOKENS,
        "candidatesTokenCount": n,
        "totalTokenCount": INPUT_TOKENS + n,
        "cachedContentTokenCount": CACHED_TOKENS,
    }


def _answer(piece: str, finish: str | None, meta: dict[str, object]) -> dict[str, object]:
    candidate: dict[str, object] = {
        "content": {"parts": [{"text": piece}], "role": "model"},
        "index": 0,
    }
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": meta,
        "modelVersion": EXAMPLE_MODEL,
        "responseId": "mock-response",
    }


def _stream(n: int) -> list[bytes]:
    chunks = []
    for i in range(n):
        partial: dict[str, object] = {
            "promptTokenCount": INPUT_TOKENS,
            "totalTokenCount": INPUT_TOKENS + i,
        }
        chunks.append(data(_answer(word(i), None, partial)))
    chunks.append(data(_answer("", "STOP", _meta(n))))
    return chunks
