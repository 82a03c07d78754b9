"""What the mock upstream answers, asked of the provider kinds (leasegate.providers).

Which endpoint a path is (`upstream_route`: an exact OpenAI or Anthropic path, an Azure
deployment path, a Gemini model path), what a typical answer looks like, and a typical error
payload or in-stream error: each is its wire's to say. An answer is rendered once per
(endpoint, stream, chunk count) with a placeholder model; a request's model is substituted
into the cached bytes, so serving a request costs a dictionary look-up and one
`bytes.replace`, not a JSON encode.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping

from leasegate.providers import EXAMPLE_MODEL, Endpoint, Example, UpstreamRoute, Wire
from leasegate.providers.common import INPUT_TOKENS, family_error_body
from leasegate.providers.kinds import upstream_route

__all__ = [
    "INPUT_TOKENS",
    "Example",
    "UpstreamRoute",
    "error_body",
    "error_event",
    "render",
    "route",
    "usage_asked",
    "with_model",
]

_MODEL_BYTES = json.dumps(EXAMPLE_MODEL).encode()


def route(path: str) -> UpstreamRoute | None:
    """The endpoint an upstream path is, as the kinds recognise it; None for no endpoint."""
    return upstream_route(path)


def render(endpoint: Endpoint, stream: bool, n: int, *, usage_asked: bool = True) -> Example:
    """The endpoint's typical answer: a body, or (streamed) its events; without
    `usage_asked`, a stream leaves out the events that carry only its usage."""
    streaming = endpoint.streams and (stream or endpoint.always_streams)
    example = endpoint.wire.example(endpoint, streaming, n)
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


def error_event(endpoint: Endpoint) -> bytes:
    """The wire's own in-stream error: OpenRouter's error chunk, Anthropic's overload, ..."""
    return endpoint.wire.example_error_event()


def error_body(status: int, endpoint: Endpoint | None = None) -> bytes:
    """An error payload for `status` in the endpoint's shape (OpenAI's for no endpoint)."""
    if endpoint is None:
        return family_error_body(status)
    return endpoint.wire.example_error_body(status)


def with_model(template: bytes, model: str) -> bytes:
    return template.replace(_MODEL_BYTES, json.dumps(model).encode())
