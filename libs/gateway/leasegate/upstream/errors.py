"""What the upstream adapter raises: its own small tree, so nothing above it sees the HTTP
client library's exceptions (and the library can change without touching the proxy).

    UpstreamError
    ├── PoolExhausted      no free connection in the account's own pool within the pool
    │                      timeout; the upstream was never asked
    ├── RequestNotSent     our request could not be put on the wire (a bad URL or header)
    ├── Unreachable        connect refused or timed out, DNS, TLS, a reset or a close before
    │                      the status line
    ├── DroppedAfterSend   the connection was closed or reset once the request had started
    │                      going out, before a status line (the request may be the cause)
    ├── HeadersTimeout     no status line within the account's headers deadline
    ├── BodyFailed         the connection failed while the body was being read
    └── UpstreamStalled    no body bytes within the first-token or idle deadline

Messages name the account or the deadline, never a credential or upstream text.
"""

from __future__ import annotations

from typing import Literal

StallPhase = Literal["first-token", "idle"]


class UpstreamError(Exception):
    """Base of everything the upstream adapter raises about a call."""


class PoolExhausted(UpstreamError):
    pass


class RequestNotSent(UpstreamError):
    pass


class Unreachable(UpstreamError):
    pass


class DroppedAfterSend(UpstreamError):
    pass


class HeadersTimeout(UpstreamError):
    pass


class BodyFailed(UpstreamError):
    pass


class UpstreamStalled(UpstreamError):
    """The upstream sent no body bytes within a deadline (names the phase and the seconds)."""

    def __init__(self, phase: StallPhase, seconds: float) -> None:
        super().__init__(f"no {phase} data from the upstream within {seconds:g} s")
        self.phase: StallPhase = phase
        self.seconds = seconds
