"""What the mock upstream answers, asked of the provider kinds (leasegate.providers) and the
demo's examples of each (leasegate.demo.examples).

Which kind's endpoint a path is (each kind's `upstream_route`: an exact OpenAI or Anthropic
path, an Azure deployment path, a Gemini model path, a Bedrock or Vertex AI model path), what
a typical answer looks like, and a typical error payload or in-stream error: each is the
kind's examples' to say. An answer is rendered once per
(endpoint, stream, chunk count) with a placeholder model; a request's model is substituted
into the cached bytes, so serving a request costs a dictionary look-up and one
`bytes.replace`, not a JSON encode.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from leasegate.demo.examples import EXAMPLE_MODEL, EXAMPLES, Example, KindExamples
from leasegate.demo.wires.base import INPUT_TOKENS, family_error_body
from leasegate.providers import KINDS, Endpoint, Wire

__all__ = [
    "INPUT_TOKENS",
    "DemoRoute",
    "Example",
    "error_answer",
    "error_event",
    "render",
    "route",
    "usage_asked",
    "with_model",
]

_MODEL_BYTES = json.dumps(EXAMPLE_MODEL).encode()


@dataclass(frozen=True, slots=True)
class DemoRoute:
    """An upstream path, as the kind whose path it is recognises it."""

    examples: KindExamples
    endpoint: Endpoint
    model: str | None
    """The model the path names, when it names one (a deployment, Gemini's, a cloud's)."""
    stream: bool
    """The path itself asks for a stream (Bedrock's `invoke-with-response-stream`, ...)."""


def route(path: str) -> DemoRoute | None:
    """The endpoint an upstream path is, asking every kind in turn; None for no endpoint."""
    for name, kind in KINDS.items():
        if (found := kind.upstream_route(path)) is not None:
            examples = EXAMPLES[name]
            stream = found.endpoint.always_streams or examples.streams(path)
            return DemoRoute(examples, found.endpoint, found.model, stream)
    return None


def render(where: DemoRoute, stream: bool, n: int, *, usage_asked: bool = True) -> Example:
    """The endpoint's typical answer: a body, or (streamed) its SSE events (before the
    kind's framing); without `usage_asked`, a stream leaves out the events that carry only
    its usage."""
    endpoint = where.endpoint
    streaming = endpoint.streams and (stream or where.stream)
    example = where.examples.answer(endpoint, streaming, n)
    if usage_asked or example.body is not None:
        return example
    wire = endpoint.wire
    return Example(None, tuple(c for c in example.chunks if not _usage_only(wire, c)))


def usage_asked(endpoint: Endpoint, body: Mapping[str, object]) -> bool:
    """Whether a stream answering `body` reports its usage, as the provider decides: a wire
    that reports it only when asked would have to ask for it (`Wire.ask_usage`) if not."""
    return not endpoint.wire.ask_usage(dict(body))


def _usage_only(wire: Wire, chunk: bytes) -> bool:
    for line in chunk.split(b"\n"):
        if line.startswith(b"data:"):
            with contextlib.suppress(ValueError):
                obj = json.loads(line[5:])
                return isinstance(obj, dict) and wire.usage_only(obj)
    return False


def error_event(where: DemoRoute) -> bytes:
    """The upstream's own in-stream error, framed as its streams are: OpenRouter's error
    chunk, Anthropic's overload, Bedrock's `modelStreamErrorException`, ..."""
    return where.examples.error_event(where.endpoint)


def error_answer(status: int, where: DemoRoute | None = None) -> tuple[Mapping[str, str], bytes]:
    """Headers and an error payload for `status` in the kind's shape (OpenAI's for no
    endpoint)."""
    if where is None:
        return {}, family_error_body(status)
    return where.examples.error(where.endpoint, status)


def with_model(template: bytes, model: str) -> bytes:
    return template.replace(_MODEL_BYTES, json.dumps(model).encode())
