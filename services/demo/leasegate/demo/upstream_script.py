"""What a test's script sees of a request to the mock upstream, and how it says to answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MockRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes
    json: dict[str, object] | None
    """The parsed body when it is a JSON object."""
    query: str = ""
    """The request target's query string, without the `?` (e.g. Azure's `api-version=...`)."""

    @property
    def stream(self) -> bool:
        return self.json is not None and self.json.get("stream") is True


@dataclass(frozen=True, slots=True)
class Reply:
    """How to answer one request. The defaults answer like a healthy provider."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    """A complete body to send as JSON instead of the rendered one (e.g. an error payload)."""
    chunks: Sequence[bytes] | None = None
    """Chunks to stream instead of the rendered ones (each sent as its own HTTP chunk), as
    given: SSE, or a cloud's own framing (leasegate.demo.eventstream for Bedrock)."""
    chunk_delay_s: float = 0.0
    """Pause before every chunk but the first."""
    chunk_delays: Sequence[float] = ()
    """Pause before chunk i; overrides chunk_delay_s for the chunks it covers."""
    end_delay_s: float = 0.0
    """Pause after the last chunk before ending the body (or cutting it): an upstream that
    keeps a finished stream open."""
    error_after: int | None = None
    """Send N chunks, then the provider's own error event, then end the stream."""
    cut_after: int | None = None
    """Send N chunks, then close the connection without ending the chunked body."""
    headers_delay_s: float = 0.0
    """Wait before the status line; math.inf hangs until the server stops."""
    reset: bool = False
    """Reset the connection (RST) instead of answering."""

    @classmethod
    def json_error(
        cls, status: int, payload: Mapping[str, object], headers: Mapping[str, str] | None = None
    ) -> Reply:
        return cls(status=status, headers=headers or {}, body=json.dumps(payload).encode())


Script = Callable[[MockRequest], Reply | None]
