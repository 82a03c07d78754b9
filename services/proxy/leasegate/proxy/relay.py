"""ASGI apps that relay the upstream's answer and end the request: each makes one `Ended`
(proxy/request.py) and calls `ProxyRuntime.finish` once, whatever happened.

`BufferedRelay` reads the answer whole and hands `finish` the sending of it, so a qualifying
failure's row is written before the caller sees it. `StreamRelay` passes SSE events through
unchanged as they complete; a scanner watches them for usage, error events and the
end-of-answer marker without re-encoding anything, and drops a data event that is not valid
JSON (counted in `malformed_chunks`, logged once per request) unless the account sets
`pass_malformed_events`, which relays every byte as it arrives. A client that goes away is
heard as Starlette's streaming response hears it: a task listening for `http.disconnect`
cancels the scope the relay runs in; the upstream response is closed and the request
finished whatever ended the stream (a stream that fails ends its request at the failure,
before the caller sees it).

A stream's usage is what its cost and budgets count: when the proxy asked the upstream for it
(`Wire.ask_usage`) the event that carries it is left out of what the caller receives; a caller
that hangs up after the answer's end is outlived for up to `LEASEGATE_STREAM_USAGE_GRACE_S`
while the usage arrives; a stream that never reports usage is charged an estimate
(leasegate.providers.estimate), marked on its row.

Both relays read the body under the account's first-token and idle deadlines
(upstream/deadlines.py). A stream that stalls or is cut before its answer is complete gets an
error event in the provider's own shape appended, so the caller's SDK raises instead of
returning a truncated answer as if it were whole; nothing is retried inside the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Mapping
from dataclasses import replace

import anyio
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.core.observation import Observation
from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.core.records import KeyRecord
from leasegate.providers import Usage
from leasegate.providers.estimate import settled_usage
from leasegate.providers.ratelimits import rate_limit_wait_s
from leasegate.proxy.request import NO_USAGE, Admission, Ended
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.routing.quota import learned, ratelimit_fields
from leasegate.upstream.clients import UpstreamResponse
from leasegate.upstream.deadlines import BodyReader, Deadlines
from leasegate.upstream.errors import BodyFailed, UpstreamError, UpstreamStalled
from leasegate.upstream.failures import (
    response_observation,
    stream_failure,
    stream_observation,
)
from leasegate.upstream.sse import StreamScanner, usage_from_body
from leasegate.wire.headers import ACCOUNT_HEADER, REQUEST_ID_HEADER
from leasegate.wire.headers import CONTEXT_FALLBACK_HEADER as _CONTEXT_FALLBACK

log = logging.getLogger("leasegate.proxy")

CONTEXT_FALLBACK_HEADER = _CONTEXT_FALLBACK.encode()

SHUTDOWN_MESSAGE = "the gateway is shutting down and ended this stream after its drain time"
END_EVENT_TIMEOUT_S = 1.0


def leasegate_headers(request_id: str, key: KeyRecord | None) -> dict[str, str]:
    headers = {REQUEST_ID_HEADER: request_id}
    if key is not None:
        headers[ACCOUNT_HEADER] = key.account_id
        headers["x-leasegate-served-model"] = key.served_model
    return headers


def refusal_response(
    error: GatewayError, request_id: str, key: KeyRecord | None = None, *, close: bool = False
) -> JSONResponse:
    """The error envelope; `close`: the connection ends with this answer."""
    headers = leasegate_headers(request_id, key)
    if error.retry_after_s is not None:
        headers["retry-after"] = retry_after_header(error.retry_after_s)
    if close:
        headers["connection"] = "close"
    return JSONResponse(error.envelope(), status_code=error.status, headers=headers)


def _response_headers(
    runtime: ProxyRuntime,
    admission: Admission,
    upstream: UpstreamResponse,
    buckets: Mapping[QuotaDimension, Bucket],
    hold: float | None,
) -> list[tuple[bytes, bytes]]:
    """`hold`: the pair's rate-limit hold this answer set (epoch seconds; None: none)."""
    account = admission.account
    passed = () if account is None else account.kind.relayed_headers  # its kind's
    if hold is not None and (
        "retry-after" in upstream.headers or "retry-after-ms" in upstream.headers
    ):
        # the wait it asked for becomes the pair's hold, never less
        passed = tuple(n for n in passed if not n.startswith("retry-after"))
    else:
        hold = None
    headers = [
        (name.encode(), value.encode())
        for name in passed
        if (value := upstream.headers.get(name)) is not None
    ]
    if hold is not None:
        wait = max(0.0, hold - runtime.clock.now().timestamp())
        headers.append((b"retry-after", retry_after_header(wait).encode()))
        headers.append((b"retry-after-ms", str(math.ceil(wait * 1000)).encode()))
    key = admission.key
    if key is not None:
        headers.extend(_ratelimit_headers(runtime, key, buckets, held=hold is not None))
    headers.extend(
        (k.encode(), v.encode()) for k, v in leasegate_headers(admission.request_id, key).items()
    )
    return headers


def _ratelimit_headers(
    runtime: ProxyRuntime,
    key: KeyRecord,
    buckets: Mapping[QuotaDimension, Bucket],
    *,
    held: bool,
) -> list[tuple[bytes, bytes]]:
    """`RateLimit-Policy` / `RateLimit` for the key's account and model: the view, with this
    answer's own rate-limit headers over it (the view may not have heard them yet)."""
    quota = runtime.quota.quota(key.account_id, key.served_model)
    if quota is None and not buckets:
        return []
    now = runtime.clock.now().timestamp()
    if buckets and not held:
        # this answer's own statement is the freshest (the view may not have heard it yet)
        quota = learned(quota, key.account_id, key.served_model, buckets, now)
    if quota is None or (fields := ratelimit_fields(quota, now)) is None:
        return []
    policy, state = fields
    found = [(b"ratelimit", state.encode())]
    if policy:
        found.append((b"ratelimit-policy", policy.encode()))
    return found


class _Relay:
    """An ASGI app relaying an upstream answer to the caller; it ends its request: one call
    of `ProxyRuntime.finish`, whatever happens."""

    __slots__ = ("_admission", "_buckets", "_deadlines", "_first_byte", "_runtime", "_upstream")

    def __init__(
        self,
        runtime: ProxyRuntime,
        admission: Admission,
        upstream: UpstreamResponse,
        deadlines: Deadlines,
        first_byte_mono: float,
        buckets: Mapping[QuotaDimension, Bucket],
    ) -> None:
        self._runtime = runtime
        self._admission = admission
        self._upstream = upstream
        self._deadlines = deadlines
        self._first_byte = first_byte_mono
        self._buckets = buckets

    def _ended(
        self, observation: Observation, usage: Usage = NO_USAGE, malformed: int = 0
    ) -> Ended:
        return Ended(
            observation,
            self._upstream.status,
            self._first_byte,
            self._buckets,
            usage,
            malformed,
        )


class BufferedRelay(_Relay):
    """A non-streaming answer (or any error status): read whole, parsed for usage, sent."""

    __slots__ = ()

    async def _read(self) -> bytes:
        reader = BodyReader(self._upstream.content, self._deadlines)
        parts = []
        try:
            while (chunk := await reader.next()) is not None:
                parts.append(chunk)
        finally:
            reader.close()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime, admission, upstream = self._runtime, self._admission, self._upstream
        try:
            ended, body, error = await self._take()
        except BaseException:
            # cancelled while reading (a shutdown): still one row
            upstream.close()
            await runtime.finish(admission, self._ended(Observation("client-abort")))
            raise
        upstream.close()

        async def answer(hold: float | None) -> None:
            if error is not None:
                refusal = refusal_response(error, admission.request_id, admission.key)
                await refusal(scope, receive, send)
                return
            headers = _response_headers(runtime, admission, upstream, self._buckets, hold)
            headers.append((b"content-length", str(len(body)).encode()))
            if ended.observation.context_length and (key := admission.key) is not None:
                if fallback := runtime.registry.context_fallback(key.model):
                    # where Dispatch may hop now: the one hop that changes model
                    headers.append((CONTEXT_FALLBACK_HEADER, fallback.encode()))
            await send(
                {"type": "http.response.start", "status": upstream.status, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body})

        await runtime.finish(admission, ended, answer)

    async def _take(self) -> tuple[Ended, bytes, GatewayError | None]:
        """The whole answer: how it ended, its body, and the refusal the caller gets instead
        when the body could not be read."""
        upstream = self._upstream
        try:
            body = upstream.error_payload(await self._read())
        except UpstreamError as exc:
            error = (
                GatewayError("upstream-timeout", "the upstream stopped answering")
                if isinstance(exc, UpstreamStalled)
                else GatewayError("upstream-unreachable", "the upstream connection failed")
            )
            return self._ended(stream_failure(exc, upstream.status)), b"", error
        wire = self._admission.endpoint.wire
        observation = response_observation(upstream.status, upstream.headers, body, wire=wire)
        if upstream.status == 429:
            now = self._runtime.clock.now().timestamp()
            wait = rate_limit_wait_s(upstream.headers, self._buckets, now)
            observation = replace(observation, rate_limit_wait_s=wait)
        usage = usage_from_body(wire, body) if upstream.is_success else NO_USAGE
        return self._ended(observation, usage), body, None


class StreamRelay(_Relay):
    """A 2xx SSE stream passed through chunk by chunk. It hears the caller go away as
    Starlette's streaming response does: a task listening for `http.disconnect` cancels the
    scope the relay runs in."""

    __slots__ = ("_finished",)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime, admission, upstream = self._runtime, self._admission, self._upstream
        account = admission.account
        drop = account is None or not account.pass_malformed_events
        wire = admission.endpoint.wire
        scanner = StreamScanner(wire, drop_malformed=drop, strip_usage_only=admission.strip_usage)
        observation = Observation("client-abort", status=upstream.status)
        self._finished = False
        gone = False
        try:
            try:
                with anyio.CancelScope() as relaying:
                    listener = asyncio.create_task(_hear_disconnect(receive, relaying))
                    try:
                        await send(
                            {
                                "type": "http.response.start",
                                "status": upstream.status,
                                "headers": _response_headers(
                                    runtime, admission, upstream, self._buckets, None
                                ),
                            }
                        )
                        observation = await self._pump(scanner, send)
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    finally:
                        listener.cancel()
                gone = relaying.cancelled_caught
            except OSError:
                gone = True  # the client's socket went away mid-send: a client abort
            except asyncio.CancelledError:
                # not the listener's doing: the server cancels what is left after the drain
                observation = Observation("gateway-shutdown", status=upstream.status)
                await self._end_with_error(send, "gateway-shutdown", SHUTDOWN_MESSAGE)
                raise
            if gone:
                await self._read_on(scanner)
        finally:
            upstream.close()
            if drop and scanner.malformed:
                log.warning(
                    "malformed stream events dropped",
                    extra={
                        "request_id": admission.request_id,
                        "account_id": account.id if account else None,
                        "dropped": scanner.malformed,
                    },
                )
            if not self._finished:
                await runtime.finish(admission, self._stream_ended(scanner, observation))

    def _stream_ended(self, scanner: StreamScanner, observation: Observation) -> Ended:
        """How the stream ended, charged its reported usage, else an estimate."""
        usage = scanner.usage
        admission = self._admission
        if admission.endpoint.completion:
            usage = settled_usage(usage, admission.body_bytes, scanner.text_chars)
        return self._ended(observation, usage, scanner.malformed)

    async def _pump(self, scanner: StreamScanner, send: Send) -> Observation:
        """Relay until the upstream ends, stalls or fails; returns how it ended."""
        status = self._upstream.status
        reader = BodyReader(self._upstream.content, self._deadlines)
        trace = self._admission.trace
        try:
            while (
                chunk := await reader.next(awaiting_first_token=not scanner.answering)
            ) is not None:
                had_error = scanner.error is not None
                out = scanner.feed(chunk)
                if trace is not None and scanner.answering:
                    trace.first_token()
                if scanner.error is not None and not had_error:
                    # an in-stream error: its row is durable before the caller reads it
                    await self._finish_first(scanner, stream_observation(scanner, status))
                if out:
                    await send({"type": "http.response.body", "body": out, "more_body": True})
        except UpstreamStalled as stalled:
            await self._flush(scanner, send)
            if scanner.completed or scanner.error is not None:
                return stream_observation(scanner, status)  # the answer (or its error) is out
            waited = "a first token" if stalled.phase == "first-token" else "the next chunk"
            message = f"the upstream sent no data for {stalled.seconds:g} s waiting for {waited}"
            timeout = Observation("timeout", status=status)
            await self._finish_first(scanner, timeout)
            await self._append_error(send, "upstream-timeout", message)
            return timeout
        except BodyFailed as exc:
            await self._flush(scanner, send)
            if scanner.completed or scanner.error is not None:
                return stream_observation(scanner, status)
            cut = stream_failure(exc, status)
            await self._finish_first(scanner, cut)
            await self._append_error(send, "upstream-truncated", "the upstream stream was cut")
            return cut
        finally:
            reader.close()
        await self._flush(scanner, send)
        observation = stream_observation(scanner, status)
        if observation.kind == "truncated":
            await self._finish_first(scanner, observation)
            await self._append_error(send, "upstream-truncated", "the upstream stream ended early")
        return observation

    async def _read_on(self, scanner: StreamScanner) -> None:
        """The caller hung up after the answer ended but before its usage arrived (OpenAI's
        usage event follows the finish): keep reading the upstream, relaying nothing, until
        the usage is in or the stream ends, for at most `LEASEGATE_STREAM_USAGE_GRACE_S`.
        A caller that hangs up mid-answer is not waited for: the upstream would go on
        generating at the account's expense; its usage is estimated."""
        grace_s = self._runtime.settings.stream_usage_grace_s
        if grace_s <= 0 or not scanner.completed or scanner.usage.reported:
            return
        reader = BodyReader(self._upstream.content, self._deadlines)
        try:
            async with asyncio.timeout(grace_s):
                while not scanner.usage.reported and (chunk := await reader.next()) is not None:
                    scanner.feed(chunk)
            if not scanner.usage.reported:
                scanner.close()  # a last event with no blank line after it
        except (TimeoutError, UpstreamError):
            pass  # past the bound, stalled or cut: the usage is estimated
        finally:
            reader.close()

    async def _finish_first(self, scanner: StreamScanner, observation: Observation) -> None:
        """The stream failed (an error event, a stall, a cut): the request ends now, so its
        row (a failure of the stream qualifies, routing/classify.py) is durable before the
        caller sees the failure; what the stream still relays changes nothing of it."""
        self._finished = True
        await self._runtime.finish(self._admission, self._stream_ended(scanner, observation))

    async def _end_with_error(self, send: Send, code: str, message: str) -> None:
        """Append an error event and end the body, best effort and briefly: the caller's
        SDK raises instead of taking a cut stream for a whole answer."""
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(END_EVENT_TIMEOUT_S):
                await self._append_error(send, code, message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _flush(self, scanner: StreamScanner, send: Send) -> None:
        """The upstream is done: forward what the scanner still holds (a last event)."""
        if rest := scanner.close():
            await send({"type": "http.response.body", "body": rest, "more_body": True})

    async def _append_error(self, send: Send, code: str, message: str) -> None:
        event = self._admission.endpoint.wire.error_event(code, message)
        await send({"type": "http.response.body", "body": event, "more_body": True})


async def _hear_disconnect(receive: Receive, relaying: anyio.CancelScope) -> None:
    """Cancels `relaying` when the caller goes away."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            relaying.cancel()
            return
