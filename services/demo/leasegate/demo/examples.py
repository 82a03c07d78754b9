"""What the demo upstream answers, per provider kind: the demo's registry of examples.

`EXAMPLES` has one `KindExamples` per kind of leasegate.providers, naming the examples of
every wire its endpoints speak (leasegate.demo.wires); the completeness test
(tests/unit/providers/test_completeness.py) walks it, and fails for a kind without an entry
or an endpoint whose wire has no examples, and reads every example back through the kind as
the proxy would. An entry says what the kind's upstream answers: a typical answer on each of
its endpoints, plain and streamed, a typical error (with the headers the provider names it
in) and a typical in-stream error, each in the shape that upstream answers in, and which of
its upstream paths ask for a stream by themselves. Most kinds answer in their wires' own
shapes; a cloud frames its streams its own way (Bedrock's AWS event stream) and names its
errors its own way (AWS's `x-amzn-ErrorType`, Google's status).

Every answer names the placeholder `EXAMPLE_MODEL`; the demo upstream puts the request's
model in its place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from leasegate.demo import eventstream
from leasegate.demo.wires.anthropic import MESSAGES_EXAMPLES
from leasegate.demo.wires.base import EXAMPLE_MODEL, Example, WireExamples
from leasegate.demo.wires.gemini import GEMINI_EXAMPLES, google_error_body
from leasegate.demo.wires.openai import CHAT_EXAMPLES
from leasegate.demo.wires.responses import RESPONSES_EXAMPLES
from leasegate.providers import Endpoint

__all__ = ["EXAMPLES", "EXAMPLE_MODEL", "Example", "KindExamples"]

_NO_HEADERS: Mapping[str, str] = {}


class KindExamples:
    """A kind whose upstream answers in its wires' own shapes, its streams as SSE."""

    stream_suffixes: tuple[str, ...] = ()
    """Ends of upstream paths that ask for a stream (besides the body's `stream: true`, or
    an endpoint that always streams)."""
    stream_content_type = "text/event-stream"

    def __init__(self, wires: Mapping[str, WireExamples]) -> None:
        self.wires = dict(wires)
        """The examples of each wire the kind's endpoints speak, by wire name."""

    def of(self, endpoint: Endpoint) -> WireExamples:
        """The examples of the endpoint's wire (KeyError: none for that wire)."""
        return self.wires[endpoint.wire.name]

    def answer(self, endpoint: Endpoint, stream: bool, n: int) -> Example:
        """A typical answer with `n` content pieces: a body, or (streamed) its SSE events."""
        return self.of(endpoint).answer(endpoint, stream, n)

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        """A typical error answer for `status`: headers and payload."""
        return _NO_HEADERS, self.of(endpoint).error_body(status)

    def error_event(self, endpoint: Endpoint) -> bytes:
        """A typical in-stream error of the upstream itself, framed as its stream is."""
        return self.of(endpoint).error_event()

    def frame(self, sse: bytes) -> bytes:
        """SSE events of `answer` framed as this kind's upstream streams them."""
        return sse

    def streams(self, path: str) -> bool:
        return path.endswith(self.stream_suffixes) if self.stream_suffixes else False


_AWS_ERRORS = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}


class BedrockExamples(KindExamples):
    """Bedrock: AWS's error shape (`{"message"}`, the type in `x-amzn-ErrorType`) and its
    streams as an AWS event stream of Anthropic's events."""

    stream_suffixes = ("/invoke-with-response-stream",)
    stream_content_type = eventstream.CONTENT_TYPE

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        name = _AWS_ERRORS.get(status, "InternalServerException")
        where = "http://internal.amazon.com/coral/com.amazon.bedrock/"
        headers = {"x-amzn-errortype": f"{name}:{where}"}
        return headers, json.dumps({"message": f"mock status {status}"}).encode()

    def error_event(self, endpoint: Endpoint) -> bytes:
        return eventstream.exception("modelStreamErrorException", "The model stream failed.")

    def frame(self, sse: bytes) -> bytes:
        return eventstream.from_sse(sse)


class VertexExamples(KindExamples):
    """Claude on Vertex AI: Anthropic's answers and streams, Google's error shape."""

    stream_suffixes = (":streamRawPredict",)

    def error(self, endpoint: Endpoint, status: int) -> tuple[Mapping[str, str], bytes]:
        return _NO_HEADERS, google_error_body(status)


_OPENAI = {"openai": CHAT_EXAMPLES, "responses": RESPONSES_EXAMPLES}
_ANTHROPIC = {"anthropic": MESSAGES_EXAMPLES}
_GEMINI = {"gemini": GEMINI_EXAMPLES}

EXAMPLES: Mapping[str, KindExamples] = {
    "openai": KindExamples(_OPENAI),
    "anthropic": KindExamples(_ANTHROPIC),
    "openrouter": KindExamples(_OPENAI),
    "openai-compatible": KindExamples(_OPENAI),
    "azure-openai": KindExamples({"openai": CHAT_EXAMPLES}),
    "gemini": KindExamples(_GEMINI),
    "bedrock": BedrockExamples(_ANTHROPIC),
    "vertex": VertexExamples(_ANTHROPIC),
    "vertex-gemini": KindExamples(_GEMINI),
}
"""Every kind's examples, by kind name."""
