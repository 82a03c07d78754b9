"""Responses that relay the upstream's answer and then end the attempt exactly once.

`StreamRelay` passes SSE bytes through unchanged as they arrive; a scanner watches them for
usage, error events and the end-of-answer marker without re-encoding anything. A client that
goes away is noticed by a watcher on `receive`, which cancels the relay; the upstream response
is closed and the attempt finished under a shield, whatever ended the stream.
"""

from __future__ import annotations

import asyncio

import anyio
import httpx
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from leasegate.accounts import Account
from leasegate.core.errors import GatewayError
from leasegate.core.observation import Observation
from leasegate.core.records import KeyRecord
from leasegate.proxy.attempt import Attempt
from leasegate.proxy.endpoints import Endpoint
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.upstream.failures import (
    response_observation,
    stream_failure,
    stream_observation,
)
from leasegate.upstream.sse import StreamScanner, error_event, usage_from_body

_PASSED_HEADERS = (
    "content-type",
    "retry-after",
    "x-request-id",
    "request-id",
    "openai-processing-ms",
)


def leasegate_headers(request_id: str, key: KeyRecord | None) -> dict[str, str]:
    headers = {"x-leasegate-request-id": request_id}
    if key is not None:
        headers["x-leasegate-account"] = key.account_id
        headers["x-leasegate-served-model"] = key.served_model
    return headers


def refusal_response(
    error: GatewayError, request_id: str, key: KeyRecord | None = None
) -> JSONResponse:
    headers = leasegate_headers(request_id, key)
    if error.retry_after_s is not None:
        headers["retry-after"] = str(max(1, int(error.retry_after_s + 0.999)))
    return JSONResponse(error.envelope(), status_code=error.status, headers=headers)


def _response_headers(attempt: Attempt, upstream: httpx.Response) -> list[tuple[bytes, bytes]]:
    headers = [
        (name.encode(), value.encode())
        for name in _PASSED_HEADERS
        if (value := upstream.headers.get(name)) is not None
    ]
    headers.extend(
        (k.encode(), v.encode())
        for k, v in leasegate_headers(attempt.request_id, attempt.key).items()
    )
    return headers


class BufferedRelay(Response):
    """A non-streaming answer (or any error status): read whole, parsed for usage, sent."""

    def __init__(
        self, runtime: ProxyRuntime, attempt: Attempt, endpoint: Endpoint, upstream: httpx.Response
    ) -> None:
        self._runtime = runtime
        self._attempt = attempt
        self._endpoint = endpoint
        self._upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime, attempt, upstream = self._runtime, self._attempt, self._upstream
        observation = Observation("client-abort")
        try:
            try:
                body = await upstream.aread()
            except httpx.TransportError as exc:
                observation = stream_failure(exc, upstream.status_code)
                raise
            observation = response_observation(upstream.status_code, upstream.headers, body)
            if upstream.is_success:
                attempt.usage = usage_from_body(self._endpoint.dialect, body)
            await runtime.release_slot(attempt)
            headers = _response_headers(attempt, upstream)
            headers.append((b"content-length", str(len(body)).encode()))
            await send(
                {"type": "http.response.start", "status": upstream.status_code, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body})
        except httpx.TimeoutException:
            error = GatewayError("upstream-timeout", "the upstream stopped answering")
            await refusal_response(error, attempt.request_id, attempt.key)(scope, receive, send)
        except httpx.TransportError:
            error = GatewayError("upstream-unreachable", "the upstream connection failed")
            await refusal_response(error, attempt.request_id, attempt.key)(scope, receive, send)
        finally:
            await _close_and_finish(runtime, attempt, upstream, observation)


class StreamRelay(Response):
    """A 2xx SSE stream passed through chunk by chunk."""

    def __init__(
        self,
        runtime: ProxyRuntime,
        attempt: Attempt,
        endpoint: Endpoint,
        account: Account,
        upstream: httpx.Response,
    ) -> None:
        self._runtime = runtime
        self._attempt = attempt
        self._endpoint = endpoint
        self._account = account
        self._upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime, attempt, upstream = self._runtime, self._attempt, self._upstream
        scanner = StreamScanner(self._endpoint.dialect)
        observation = Observation("client-abort", status=upstream.status_code)
        task = asyncio.current_task()
        watcher = asyncio.create_task(_cancel_on_disconnect(receive, task))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status_code,
                    "headers": _response_headers(attempt, upstream),
                }
            )
            observation = await self._pump(scanner, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if task is None or not watcher.done() or task.cancelling() > 1:
                raise  # not the watcher's doing: shutdown, so let it through
            task.uncancel()
        except OSError:
            pass  # the client's socket went away mid-send: a client abort
        finally:
            watcher.cancel()
            attempt.usage = scanner.usage
            attempt.malformed_chunks = scanner.malformed
            await _close_and_finish(runtime, attempt, upstream, observation)

    async def _pump(self, scanner: StreamScanner, send: Send) -> Observation:
        """Relay until the upstream ends; returns how it ended."""
        settings, account = self._runtime.settings, self._account
        idle_s = account.stream_idle_timeout_s or settings.stream_idle_timeout_s
        first_s = account.first_token_timeout_s or settings.first_token_timeout_s or idle_s
        status = self._upstream.status_code
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(first_s) as deadline:
                async for chunk in self._upstream.aiter_raw():
                    deadline.reschedule(loop.time() + idle_s)
                    scanner.feed(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except TimeoutError:
            await self._append_error(send, "upstream-timeout", "the upstream stream stalled")
            return Observation("timeout", status=status)
        except httpx.TransportError as exc:
            scanner.close()
            observation = stream_failure(exc, status)
            await self._append_error(send, "upstream-truncated", "the upstream stream was cut")
            return observation
        scanner.close()
        observation = stream_observation(scanner, status)
        if observation.kind == "truncated":
            await self._append_error(send, "upstream-truncated", "the upstream stream ended early")
        return observation

    async def _append_error(self, send: Send, code: str, message: str) -> None:
        event = error_event(self._endpoint.dialect, code, message)
        await send({"type": "http.response.body", "body": event, "more_body": True})


async def _close_and_finish(
    runtime: ProxyRuntime, attempt: Attempt, upstream: httpx.Response, observation: Observation
) -> None:
    """Shielded from the cancellation that a client abort is; the attempt is finished (its
    slot given back) even if closing the upstream response raises."""
    with anyio.CancelScope(shield=True):
        try:
            await upstream.aclose()
        finally:
            await runtime.finish(attempt, observation)


async def _cancel_on_disconnect(receive: Receive, task: asyncio.Task[object] | None) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            if task is not None:
                task.cancel()
            return
