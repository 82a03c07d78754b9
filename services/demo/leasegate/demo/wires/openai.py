"""OpenAI's chat and legacy completions wire: a chat completion, a completion, embeddings,
and their streams (usage in a last, choice-less chunk), OpenRouter's mid-stream error."""

from __future__ import annotations

from leasegate.demo.wires.base import (
    CACHED_TOKENS,
    CREATED,
    EXAMPLE_MODEL,
    INPUT_TOKENS,
    Example,
    WireExamples,
    data,
    dump,
    family_error_body,
    text,
    word,
)
from leasegate.providers import Endpoint
from leasegate.providers.openai import COMPLETIONS, EMBEDDINGS


class ChatExamples(WireExamples):
    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        if endpoint is EMBEDDINGS:
            return Example(_embeddings())
        legacy = endpoint is COMPLETIONS
        if stream:
            return Example(None, tuple(_stream(n, legacy)))
        return Example(_completion(n) if legacy else _chat(n))

    def error_body(self, status: int) -> bytes:
        return family_error_body(status)

    def error_event(self) -> bytes:
        """OpenRouter's mid-stream refusal: an error object in a chunk."""
        return data(
            {
                "id": "gen-mock",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": EXAMPLE_MODEL,
                "error": {"code": 502, "message": "Provider returned error"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            }
        )


CHAT_EXAMPLES = ChatExamples()


def _usage(n: int) -> dict[str, object]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": n,
        "total_tokens": INPUT_TOKENS + n,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    }


def _chat(n: int) -> bytes:
    message = {"role": "assistant", "content": text(n)}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    return dump(
        {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": CREATED,
            "model": EXAMPLE_MODEL,
            "choices": [choice],
            "usage": _usage(n),
        }
    ).encode()


def _stream(n: int, legacy: bool) -> list[bytes]:
    kind = "text_completion" if legacy else "chat.completion.chunk"
    head = {"id": "chatcmpl-mock", "object": kind, "created": CREATED, "model": EXAMPLE_MODEL}

    def choice(i: int, finish: str | None) -> dict[str, object]:
        piece = word(i) if finish is None else ""
        if legacy:
            return {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish}
        delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    chunks = [data({**head, "choices": [choice(i, None)], "usage": None}) for i in range(n)]
    chunks.append(data({**head, "choices": [choice(n, "stop")], "usage": None}))
    chunks.append(data({**head, "choices": [], "usage": _usage(n)}))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def _completion(n: int) -> bytes:
    choice = {"index": 0, "text": text(n), "logprobs": None, "finish_reason": "stop"}
    return dump(
        {
            "id": "cmpl-mock",
            "object": "text_completion",
            "created": CREATED,
            "model": EXAMPLE_MODEL,
            "choices": [choice],
            "usage": _usage(n),
        }
    ).encode()


def _embeddings() -> bytes:
    vector = [round(0.125 * (i - 4), 3) for i in range(8)]
    return dump(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": vector}],
            "model": EXAMPLE_MODEL,
            "usage": {"prompt_tokens": INPUT_TOKENS, "total_tokens": INPUT_TOKENS},
        }
    ).encode()
