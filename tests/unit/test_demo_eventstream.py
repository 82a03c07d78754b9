"""The demo's AWS event-stream encoder writes what botocore reads: botocore's own parser
(the one boto3 users' `invoke_model_with_response_stream` goes through, with Bedrock's
service model) decodes its chunks and raises on its exceptions, and the proxy's decoder turns
it back into the SSE events it was made from."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.eventstream import EventStream, EventStreamBuffer, EventStreamError
from botocore.parsers import EventStreamJSONParser
from botocore.session import get_session

from leasegate.demo import eventstream
from leasegate.providers.bedrock import EventStreamDecoder

EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hé"}},
    {"type": "message_stop"},
]
SSE = b"".join(
    b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in EVENTS
)


class _Raw:
    """What botocore's EventStream reads from: an HTTP body's `stream()`."""

    def __init__(self, data: bytes, piece: int = 5) -> None:
        self._data, self._piece = data, piece

    def stream(self) -> Iterator[bytes]:
        for i in range(0, len(self._data), self._piece):
            yield self._data[i : i + self._piece]

    def close(self) -> None:
        pass


def _bedrock_stream(data: bytes) -> EventStream:
    model = get_session().get_service_model("bedrock-runtime")
    operation = model.operation_model("InvokeModelWithResponseStream")
    shape = operation.output_shape.members["body"]
    return EventStream(_Raw(data), shape, EventStreamJSONParser(), operation.name)


def test_botocores_bedrock_parser_reads_the_chunks() -> None:
    framed = eventstream.from_sse(SSE)
    events = [json.loads(e["chunk"]["bytes"]) for e in _bedrock_stream(framed)]
    assert events == EVENTS


def test_botocores_bedrock_parser_raises_on_an_exception() -> None:
    framed = eventstream.from_sse(SSE[: SSE.index(b"\n\n") + 2])
    framed += eventstream.exception("modelStreamErrorException", "the model failed")
    stream = iter(_bedrock_stream(framed))
    assert json.loads(next(stream)["chunk"]["bytes"]) == EVENTS[0]
    with pytest.raises(EventStreamError, match="modelStreamErrorException"):
        next(stream)


def test_each_message_is_checked_and_labelled() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(eventstream.chunk(b'{"type":"ping"}'))
    (message,) = list(buffer)
    assert message.headers[":message-type"] == "event"
    assert message.headers[":event-type"] == "chunk"
    assert base64.b64decode(json.loads(message.payload)["bytes"]) == b'{"type":"ping"}'
    corrupt = bytearray(eventstream.chunk(b"{}"))
    corrupt[-1] ^= 1
    buffer = EventStreamBuffer()
    buffer.add_data(bytes(corrupt))
    with pytest.raises(Exception, match=r"[Cc]hecksum|CRC"):
        list(buffer)


def test_the_proxy_decodes_it_back_into_the_same_sse() -> None:
    framed = eventstream.from_sse(SSE)
    decoder = EventStreamDecoder()
    out = b"".join(decoder.feed(framed[i : i + 3]) for i in range(0, len(framed), 3))
    assert [json.loads(line[6:]) for line in out.split(b"\n") if line.startswith(b"data: ")] == (
        EVENTS
    )
    assert out.count(b"event: ") == len(EVENTS)
