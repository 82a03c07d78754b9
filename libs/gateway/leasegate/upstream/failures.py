"""What went wrong with an upstream call, as the classifier and the caller need to hear it.

Before the response headers (`send_failure`, from `UpstreamClients.send`'s errors):

    PoolExhausted        refused `upstream-pool-exhausted` (503, held): our own pool had no
                         free connection; the upstream is not blamed
    Unreachable          connect-error (caller: 502 `upstream-unreachable`): refused, DNS,
                         TLS, connect timeout, a reset or a close before the status line
    DroppedAfterSend     dropped (upstream-error, model scope; caller: 502
                         `upstream-unreachable`): the caller's own request may have provoked
                         it, so never account-level
    HeadersTimeout       timeout (caller: 504 `upstream-timeout`)
    RequestNotSent       refused `upstream-unreachable`: our request could not be sent;
                         nothing says the account is unwell

After the headers (`stream_failure`): a stall is `timeout`, a failed connection `truncated`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from leasegate.core.errors import GatewayError
from leasegate.core.observation import Observation
from leasegate.core.retry_after import retry_after_seconds
from leasegate.providers import Wire
from leasegate.upstream.errors import (
    DroppedAfterSend,
    HeadersTimeout,
    PoolExhausted,
    RequestNotSent,
    UpstreamError,
    UpstreamStalled,
)
from leasegate.upstream.sse import StreamScanner


@dataclass(frozen=True, slots=True)
class SendFailure:
    observation: Observation
    """What the evidence row and the health store record."""
    error: GatewayError
    """What the caller is answered."""


def send_failure(exc: UpstreamError, account_id: str) -> SendFailure:
    """Map an exception raised by `UpstreamClients.send` (no headers arrived)."""
    if isinstance(exc, PoolExhausted):
        return _refused(
            "upstream-pool-exhausted",
            f"no free connection to account {account_id} within the pool timeout",
        )
    if isinstance(exc, RequestNotSent):
        return _refused(
            "upstream-unreachable", f"the request to account {account_id} could not be sent"
        )
    if isinstance(exc, DroppedAfterSend):
        return SendFailure(
            Observation(kind="dropped"),
            GatewayError("upstream-unreachable", f"account {account_id} dropped the connection"),
        )
    if isinstance(exc, HeadersTimeout):
        return SendFailure(
            Observation(kind="timeout"),
            GatewayError("upstream-timeout", f"account {account_id} did not answer in time"),
        )
    return SendFailure(
        Observation(kind="connect-error"),
        GatewayError("upstream-unreachable", f"account {account_id} could not be reached"),
    )


def _refused(code: str, message: str) -> SendFailure:
    return SendFailure(Observation(kind="refused", refusal_code=code), GatewayError(code, message))


def stream_failure(exc: UpstreamError, status: int) -> Observation:
    """Map an exception raised while reading a response whose headers had arrived."""
    if isinstance(exc, UpstreamStalled | HeadersTimeout):
        return Observation(kind="timeout", status=status)
    return Observation(kind="truncated", status=status)


def stream_observation(scanner: StreamScanner, status: int) -> Observation:
    """How a 2xx stream that ended without a transport error went (call after `close()`)."""
    if scanner.error is not None:
        return Observation(
            kind="stream-error",
            status=status,
            error_type=scanner.error.type,
            error_code=scanner.error.code,
        )
    if not scanner.completed:
        return Observation(kind="truncated", status=status)
    return Observation(kind="response", status=status)


def response_observation(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime | None = None,
    *,
    wire: Wire,
) -> Observation:
    """A complete response: a success, or an error status with its payload's identifiers,
    read by the endpoint's wire."""
    if status < 400:
        return Observation(kind="response", status=status)
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        obj = {}
    error_type, error_code = wire.error_fields(obj)
    return Observation(
        kind="response",
        status=status,
        error_type=error_type,
        error_code=error_code,
        retry_after_s=retry_after_seconds(headers, now),
        context_length=status < 500 and wire.context_length(obj),
    )


def error_fields(body: bytes, wire: Wire) -> tuple[str | None, str | None]:
    """(type, code) of an upstream error payload; (None, None) when it has neither."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    return wire.error_fields(obj) if isinstance(obj, dict) else (None, None)
