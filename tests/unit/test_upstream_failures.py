"""Transport failures, error payloads and Retry-After, as the classifier and caller see them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from leasegate.core.observation import Observation
from leasegate.core.retry_after import retry_after_seconds
from leasegate.providers import wire_named
from leasegate.upstream.clients import send_error
from leasegate.upstream.errors import (
    BodyFailed,
    HeadersTimeout,
    PoolExhausted,
    RequestNotSent,
    Unreachable,
    UpstreamStalled,
)
from leasegate.upstream.failures import (
    error_fields,
    response_observation,
    send_failure,
    stream_failure,
    stream_observation,
)
from leasegate.upstream.sse import StreamScanner

OPENAI_WIRE = wire_named("openai")

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_pool_timeout_is_the_gateways_refusal_not_an_upstream_failure() -> None:
    failure = send_failure(PoolExhausted("pool"), "openai-main")
    assert failure.observation == Observation(
        kind="refused", refusal_code="upstream-pool-exhausted"
    )
    assert failure.error.code == "upstream-pool-exhausted"
    assert failure.error.status == 503
    assert failure.error.disposition == "held"
    assert "openai-main" in failure.error.message


@pytest.mark.parametrize(
    "exc",
    [
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientOSError(104, "Connection reset by peer"),
        aiohttp.ConnectionTimeoutError("connect"),
        aiohttp.ClientConnectionError("refused"),
        ConnectionRefusedError(111, "refused"),
    ],
)
def test_failures_to_reach_the_upstream_are_connect_errors(exc: BaseException) -> None:
    mapped = send_error(exc, "acct", 30.0, headers_expired=False)
    assert isinstance(mapped, Unreachable)
    failure = send_failure(mapped, "acct")
    assert failure.observation == Observation(kind="connect-error")
    assert failure.error.code == "upstream-unreachable"
    assert failure.error.status == 502


def test_no_headers_in_time_is_a_timeout() -> None:
    mapped = send_error(TimeoutError(), "acct", 0.5, headers_expired=True)
    assert isinstance(mapped, HeadersTimeout)
    failure = send_failure(mapped, "acct")
    assert failure.observation == Observation(kind="timeout")
    assert failure.error.code == "upstream-timeout"
    assert failure.error.status == 504


def test_a_request_we_could_not_send_does_not_blame_the_account() -> None:
    mapped = send_error(ValueError("Newline in header"), "acct", 30.0, headers_expired=False)
    assert isinstance(mapped, RequestNotSent)
    failure = send_failure(mapped, "acct")
    assert failure.observation.kind == "refused"
    assert failure.observation.refusal_code == "upstream-unreachable"


@pytest.mark.parametrize("exc", [asyncio.CancelledError(), RuntimeError("a bug")])
def test_what_is_not_an_upstream_failure_is_not_translated(exc: BaseException) -> None:
    assert send_error(exc, "acct", 30.0, headers_expired=False) is None


def test_failures_after_headers() -> None:
    stalled = UpstreamStalled("idle", 1.0)
    assert stream_failure(stalled, 200) == Observation(kind="timeout", status=200)
    assert stream_failure(BodyFailed("cut"), 200) == Observation(kind="truncated", status=200)


def _scanned(body: bytes) -> StreamScanner:
    scanner = StreamScanner("anthropic")
    scanner.feed(body)
    scanner.close()
    return scanner


def test_stream_observation_prefers_the_error_then_completion() -> None:
    error = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n'
    stop = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    assert stream_observation(_scanned(error + stop), 200) == Observation(
        kind="stream-error", status=200, error_type="overloaded_error"
    )
    assert stream_observation(_scanned(stop), 200) == Observation(kind="response", status=200)
    assert stream_observation(_scanned(b""), 200) == Observation(kind="truncated", status=200)


def test_response_observation_reads_the_error_payload_and_retry_after() -> None:
    body = json.dumps({"error": {"type": "requests", "code": "rate_limit_exceeded"}}).encode()
    observed = response_observation(
        429, CIMultiDictProxy(CIMultiDict({"Retry-After": "7"})), body, NOW, wire=OPENAI_WIRE
    )
    assert observed == Observation(
        kind="response",
        status=429,
        error_type="requests",
        error_code="rate_limit_exceeded",
        retry_after_s=7.0,
    )
    assert response_observation(200, {}, b"{}", wire=OPENAI_WIRE) == Observation(
        kind="response", status=200
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"error": {"message": "x", "type": "insufficient_quota", "code": "insufficient_quota"}},
            ("insufficient_quota", "insufficient_quota"),
        ),
        (
            {"error": {"type": "invalid_request_error", "code": "model_not_found"}},
            ("invalid_request_error", "model_not_found"),
        ),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ("overloaded_error", None),
        ),
        ({"error": {"code": 429, "message": "Rate limit exceeded"}}, (None, "429")),
        (
            {"object": "error", "type": "NotFoundError", "code": 404, "message": "x"},
            ("NotFoundError", "404"),
        ),
        ({"type": "error", "code": "server_error", "message": "x"}, (None, "server_error")),
        ({"error": "something broke"}, (None, None)),
        ({"error": {"type": "the model said: my secret prompt", "code": True}}, (None, None)),
        ({"detail": "Not Found"}, (None, None)),
        ([1, 2], (None, None)),
    ],
)
def test_error_fields(body: object, expected: tuple[str | None, str | None]) -> None:
    assert error_fields(json.dumps(body).encode(), OPENAI_WIRE) == expected


def test_error_fields_of_a_non_json_body() -> None:
    assert error_fields(b"<html>502 Bad Gateway</html>", OPENAI_WIRE) == (None, None)
    assert error_fields(b"", OPENAI_WIRE) == (None, None)


@given(st.binary(max_size=200))
def test_error_fields_never_raises_and_only_returns_identifiers(body: bytes) -> None:
    for value in error_fields(body, OPENAI_WIRE):
        assert value is None or (len(value) <= 64 and " " not in value)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": " 1.5 "}, 1.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Sun, 01 Mar 2026 11:59:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, NOW) == expected


def test_retry_after_is_case_insensitive_on_real_headers() -> None:
    assert retry_after_seconds(CIMultiDictProxy(CIMultiDict({"Retry-After": "3"}))) == 3.0


@given(st.text(max_size=40))
def test_retry_after_never_raises(value: str) -> None:
    seconds = retry_after_seconds({"retry-after": value}, NOW)
    assert seconds is None or seconds >= 0
