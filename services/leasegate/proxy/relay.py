"""Responses that relay the upstream's answer and then end the attempt exactly once.

`StreamRelay` passes SSE events through unchanged as they complete; a scanner watches them
for usage, error events and the end-of-answer marker without re-encoding anything, and drops
a data event that is not valid JSON (counted in `malformed_chunks`, logged once per request)
unless the account sets `pass_malformed_events`, which relays every byte as it arrives. A
client that goes away is noticed by a watcher on `receive`, which cancels the relay; the
upstream response is closed and the attempt finished under a shield, whatever ended the
stream.

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
from dataclasses import replace

import anyio
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.core.observation import Observation
from leasegate.core.records import KeyRecord
from leasegate.providers import Endpoint, Usage
from leasegate.providers.estimate import settled_usage
from leasegate.providers.ratelimits import rate_limit_wait_s
from leasegate.proxy.attempt import Attempt
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.routing.classify import classify
from leasegate.routing.quota import learned, ratelimit_fields
from leasegate.upstream.clients import UpstreamResponse
from leasegate.upstream.deadlines import BodyReader, Deadlines
from leasegate.upstream.errors import BodyFailed, UpstreamError, UpstreamStalled
from leasegate.upstream.failures import (
    response_observation,
    stream_failure,
    stream_observation,
)
from leasegate.upstream.sse import StreamScanner
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
    runtime: ProxyRuntime, attempt: Attempt, upstream: UpstreamResponse
) -> list[tuple[bytes, bytes]]:
    passed = attempt.relayed_headers  # its kind's
    hold = attempt.quota_hold_until
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
    if attempt.key is not None:
        headers.extend(_ratelimit_headers(runtime, attempt, attempt.key))
    headers.extend(
        (k.encode(), v.encode())
        for k, v in leasegate_headers(attempt.request_id, attempt.key).items()
    )
    return headers


def _ratelimit_headers(
    runtime: ProxyRuntime, attempt: Attempt, key: KeyRecord
) -> list[tuple[bytes, bytes]]:
    """`RateLimit-Policy` / `RateLimit` for the key's account and model: the view, with this
    answer's own rate-limit headers over it (the view may not have heard them yet)."""
    quota = runtime.quota.quota(key.account_id, key.served_model)
    if quota is None and not attempt.quota_buckets:
        return []
    now = runtime.clock.now().timestamp()
    if attempt.quota_buckets and attempt.quota_hold_until is None:
        # this answer's own statement is the freshest (the view may not have heard it yet)
        quota = learned(quota, key.account_id, key.served_model, attempt.quota_buckets, now)
    if quota is None or (fields := ratelimit_fields(quota, now)) is None:
        return []
    policy, state = fields
    found = [(b"ratelimit", state.encode())]
    if policy:
        found.append((b"ratelimit-policy", policy.encode()))
    return found


class _Relay(Response):
    """An upstream answer on its way to the client; the subclass decides how it is relayed
    and ends the attempt exactly once."""

    def __init__(
        self,
        runtime: ProxyRuntime,
        attempt: Attempt,
        endpoint: Endpoint,
        upstream: UpstreamResponse,
        deadlines: Deadlines,
    ) -> None:
        self._runtime = runtime
        self._attempt = attempt
        self._endpoint = endpoint
        self._upstream = upstream
        self._deadlines = deadlines


class BufferedRelay(_Relay):
    """A non-streaming answer (or any error status): read whole, parsed for usage, sent."""

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
        runtime, attempt, upstream = self._runtime, self._attempt, self._upstream
        observation = Observation("client-abort")
        try:
            error: GatewayError | None = None
            try:
                body = upstream.error_payload(await self._read())
            except UpstreamError as exc:
                observation = stream_failure(exc, upstream.status)
                error = (
                    GatewayError("upstream-timeout", "the upstream stopped answering")
                    if isinstance(exc, UpstreamStalled)
                    else GatewayError("upstream-unreachable", "the upstream connection failed")
                )
            else:
                wire = self._endpoint.wire
                observation = response_observation(
                    upstream.status, upstream.headers, body, wire=wire
                )
                if upstream.status == 429:
                    now = runtime.clock.now().timestamp()
                    wait = rate_limit_wait_s(upstream.headers, attempt.quota_buckets, now)
                    observation = replace(observation, rate_limit_wait_s=wait)
                if upstream.is_success:
                    attempt.usage = wire.usage_from_body(body)
            if qualifies(observation, attempt):
                # the row is durable before the caller can cite it in a hop
                await _close_and_finish(runtime, attempt, upstream, observation)
            await runtime.release_slot(attempt)
            if error is not None:
                await refusal_response(error, attempt.request_id, attempt.key)(scope, receive, send)
                return
            headers = _response_headers(runtime, attempt, upstream)
            headers.append((b"content-length", str(len(body)).encode()))
            if observation.context_length and attempt.key is not None:
                if fallback := runtime.registry.context_fallback(attempt.key.model):
                    # where Dispatch may hop now: the one hop that changes model
                    headers.append((CONTEXT_FALLBACK_HEADER, fallback.encode()))
            await send(
                {"type": "http.response.start", "status": upstream.status, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body})
        finally:
            await _close_and_finish(runtime, attempt, upstream, observation)


class StreamRelay(_Relay):
    """A 2xx SSE stream passed through chunk by chunk."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime, attempt, upstream = self._runtime, self._attempt, self._upstream
        account = runtime.registry.account(attempt.key.account_id) if attempt.key else None
        drop = account is None or not account.pass_malformed_events
        strip = attempt.strip_usage
        scanner = StreamScanner(self._endpoint.wire, drop_malformed=drop, strip_usage_only=strip)
        observation = Observation("client-abort", status=upstream.status)
        task = asyncio.current_task()
        watcher = asyncio.create_task(_cancel_on_disconnect(receive, task))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status,
                    "headers": _response_headers(runtime, attempt, upstream),
                }
            )
            observation = await self._pump(scanner, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if task is None or not watcher.done() or task.cancelling() > 1:
                # not the watcher's doing: the server cancels what is left after the drain
                observation = Observation("gateway-shutdown", status=upstream.status)
                await self._end_with_error(send, "gateway-shutdown", SHUTDOWN_MESSAGE)
                raise
            task.uncancel()
            await self._read_on(scanner)
        except OSError:
            # the client's socket went away mid-send: a client abort
            await self._read_on(scanner)
        finally:
            watcher.cancel()
            if not attempt.finished:
                attempt.usage = self._usage(scanner)
                attempt.malformed_chunks = scanner.malformed
            if drop and scanner.malformed:
                log.warning(
                    "malformed stream events dropped",
                    extra={
                        "request_id": attempt.request_id,
                        "account_id": account.id if account else None,
                        "dropped": scanner.malformed,
                    },
                )
            await _close_and_finish(runtime, attempt, upstream, observation)

    async def _pump(self, scanner: StreamScanner, send: Send) -> Observation:
        """Relay until the upstream ends, stalls or fails; returns how it ended."""
        status = self._upstream.status
        reader = BodyReader(self._upstream.content, self._deadlines)
        trace = self._attempt.trace
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

    def _usage(self, scanner: StreamScanner) -> Usage:
        """What the attempt is charged: the stream's reported usage, else an estimate."""
        if not self._endpoint.completion:
            return scanner.usage
        return settled_usage(scanner.usage, self._attempt.body_bytes, scanner.text_chars)

    async def _finish_first(self, scanner: StreamScanner, observation: Observation) -> None:
        """End the attempt now if this failure qualifies for a hop: its row is then durable
        before the caller sees the failure. Shielded: a disconnect must not lose the row."""
        if not qualifies(observation, self._attempt):
            return
        self._attempt.usage = self._usage(scanner)
        self._attempt.malformed_chunks = scanner.malformed
        with anyio.CancelScope(shield=True):
            await self._runtime.finish(self._attempt, observation)

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
        event = self._endpoint.wire.error_event(code, message)
        await send({"type": "http.response.body", "body": event, "more_body": True})


def qualifies(observation: Observation, attempt: Attempt) -> bool:
    return classify(observation, attempt.errors).qualifying


async def _close_and_finish(
    runtime: ProxyRuntime, attempt: Attempt, upstream: UpstreamResponse, observation: Observation
) -> None:
    """Shielded from the cancellation that a client abort is; the attempt is finished (its
    slot given back) even if closing the upstream response raises."""
    with anyio.CancelScope(shield=True):
        try:
            upstream.close()
        finally:
            await runtime.finish(attempt, observation)


async def _cancel_on_disconnect(receive: Receive, task: asyncio.Task[object] | None) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            if task is not None:
                task.cancel()
            return
