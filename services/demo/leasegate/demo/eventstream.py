"""AWS's event-stream framing (`application/vnd.amazon.eventstream`), written: what Bedrock's
InvokeModelWithResponseStream answers, for the demo upstream and the tests' mock Bedrock.

A message is its total length and its headers' length (4 bytes each, big-endian), a CRC32 of
those 8 bytes, the headers (a 1-byte name length, the name, value type 7 = string, a 2-byte
value length, the value), the payload, and a CRC32 of everything before it. The proxy reads
it with botocore's parser (leasegate.providers.bedrock); the tests decode this encoder's
output with that parser.

Bedrock wraps each Anthropic stream event as a `chunk` event whose payload is
`{"bytes": base64(the event's JSON)}`; a failure mid-stream is an `exception` message
(`modelStreamErrorException`, `throttlingException`, ...) with `{"message": ...}`.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _headers(headers: Mapping[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name
        out += struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One framed message."""
    head = _headers(headers)
    prelude = struct.pack("!II", 12 + len(head) + len(payload) + 4, len(head))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    framed = prelude + head + payload
    return framed + struct.pack("!I", binascii.crc32(framed))


def chunk(event_json: bytes) -> bytes:
    """A `chunk` event carrying one Anthropic stream event (its JSON), base64 in `bytes`."""
    inner = base64.b64encode(event_json).decode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps({"bytes": inner}).encode())


def exception(name: str, text: str) -> bytes:
    """An exception message (`modelStreamErrorException`, `throttlingException`, ...)."""
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return message(headers, json.dumps({"message": text}).encode())


def from_sse(sse: bytes) -> bytes:
    """The SSE events in `sse` (Anthropic's: `event:` and `data:` lines) as Bedrock streams
    them: one chunk event per `data:` line; anything else (comments, blank lines) is not."""
    return b"".join(
        chunk(line[5:].strip()) for line in sse.split(b"\n") if line.startswith(b"data:")
    )
