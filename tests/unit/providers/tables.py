"""The shape of a provider kind's behaviour table (one test module per kind module).

Each `tests/unit/providers/test_<module>.py` names the kinds it covers and gives one table per
part of the seam; `test_completeness.py` runs every table against every kind it covers and
refuses a kind whose module has no table, or a table that leaves a part or a wire out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from leasegate.providers import Endpoint, StreamError, Usage


@dataclass(frozen=True)
class BodyUsage:
    """A non-streaming answer and the usage read from it."""

    endpoint: Endpoint
    body: bytes
    usage: Usage


@dataclass(frozen=True)
class StreamReading:
    """A whole stream and what the scanner reads from it."""

    endpoint: Endpoint
    stream: bytes
    usage: Usage
    completed: bool
    error: StreamError | None = None


@dataclass(frozen=True)
class Classified:
    """An upstream failure and its class: `status` None for a stream (answered 200)."""

    endpoint: Endpoint
    status: int | None
    payload: bytes
    outcome: str
    scope: str | None
    qualifying: bool
    reason: str | None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The response's headers (lower-case): where a cloud names its error type."""


@dataclass(frozen=True)
class Rendered:
    """The error event the gateway appends, parsed: its `event:` name and its data."""

    endpoint: Endpoint
    code: str
    event: str | None
    data: dict[str, object]
