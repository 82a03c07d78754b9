"""A small, fast, scriptable stand-in for every provider kind's upstream.

A raw asyncio HTTP/1.1 server (keep-alive, Content-Length request bodies) answering POST on
every path a provider kind sends to (/v1/chat/completions, /v1/messages, Azure's
/openai/deployments/{deployment}/chat/completions, Gemini's
/v1beta/models/{model}:generateContent, Bedrock's /model/{modelId}/invoke and
/invoke-with-response-stream, Vertex AI's .../publishers/anthropic/models/{model}:rawPredict
and :streamRawPredict, .../publishers/google/models/{model}:generateContent and
:streamGenerateContent, ...: the kinds say which, leasegate.providers) with pre-rendered JSON
or a stream in that kind's shape (leasegate.demo.examples: SSE, or Bedrock's AWS event
stream), echoing the request's model (the path's, else the body's `model`); like OpenAI, a
chat or completions stream reports its usage only when the request sets
`stream_options.include_usage`. It accepts any credential and any signature (SigV4, an OAuth2
token): it is a demo; the tests' mock clouds verify them. A test's `script` picks a
`Reply` per request: an error status, Retry-After, slow chunks, an in-stream error event, a
connection cut mid-stream, a hang before headers, a reset.

    async with MockUpstream() as upstream:
        ... upstream.url ...

Run standalone: `python -m leasegate.demo.upstream --host 127.0.0.1 --port 8090`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import socket
import struct
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from types import TracebackType

from leasegate.demo.upstream_payloads import (
    DemoRoute,
    Example,
    error_answer,
    error_event,
    render,
    route,
    usage_asked,
    with_model,
)
from leasegate.demo.upstream_script import MockRequest, Reply, Script

__all__ = ["DEFAULT_CHUNKS", "MockRequest", "MockUpstream", "Reply", "Script", "main"]

DEFAULT_CHUNKS = 20
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_MAX_TEMPLATES = 64


class MockUpstream:
    def __init__(
        self,
        script: Script | None = None,
        *,
        chunks: int = DEFAULT_CHUNKS,
        max_recorded: int = 1000,
    ) -> None:
        self.script = script
        self.chunks = chunks
        self.requests: deque[MockRequest] = deque(maxlen=max_recorded)
        self.count = 0
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.host = "127.0.0.1"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._templates: dict[tuple[object, object, bool, int, bool], Example] = {}
        self._wire: dict[tuple[str, bool, int, str, bool], bytes] = {}
        self._routes: dict[str, DemoRoute | None] = {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._stopping.clear()
        self._server = await asyncio.start_server(self._connection, host, port)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> MockUpstream:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while await self._exchange(reader, writer):
                pass
        except (
            ConnectionError,
            ValueError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass  # the client went away or sent garbage: this connection is over
        except asyncio.CancelledError:
            # stop() cancels this connection's own task; on 3.11 the server's done-callback
            # calls task.exception() on it, which raises for a cancelled task.
            if not self._stopping.is_set():
                raise
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; whether the connection may carry another."""
        request = await _read_request(reader)
        if request is None:
            return False
        self.count += 1
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self.script(request) if self.script is not None else None
            where = self._route(request.path)
            if reply is None and request.method == "POST" and request.json is not None and where:
                writer.write(self._default_wire(request, where, request.json))
                await writer.drain()
                keep = True
            else:
                keep = await self._answer(request, where, reply or Reply(), writer)
        finally:
            self.in_flight -= 1
        return keep and request.headers.get("connection", "").lower() != "close"

    def _route(self, path: str) -> DemoRoute | None:
        if path not in self._routes:
            if len(self._routes) >= _MAX_TEMPLATES:
                self._routes.clear()
            self._routes[path] = route(path)
        return self._routes[path]

    async def _answer(
        self,
        request: MockRequest,
        where: DemoRoute | None,
        reply: Reply,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if reply.reset:
            _reset(writer)
            return False
        if reply.headers_delay_s == math.inf:
            await self._stopping.wait()
            return False
        if reply.headers_delay_s > 0:
            await asyncio.sleep(reply.headers_delay_s)
        if reply.body is not None:
            await _send_body(writer, reply.status, reply.headers, reply.body)
        elif request.method != "POST" or where is None:
            status = 405 if where is not None else 404
            await _send_error(writer, status, reply.headers, where)
        elif request.json is None:
            await _send_error(writer, 400, reply.headers, where)
        elif reply.status >= 400:
            await _send_error(writer, reply.status, reply.headers, where)
        else:
            model = _model(where, request.json)
            asked = usage_asked(where.endpoint, request.json)
            rendered = self._rendered(where, request.stream, asked)
            if rendered.body is not None and reply.chunks is None:
                await _send_body(
                    writer, reply.status, reply.headers, with_model(rendered.body, model)
                )
                return True
            chunks = reply.chunks
            if chunks is None:
                chunks = [where.examples.frame(with_model(c, model)) for c in rendered.chunks]
            error = with_model(error_event(where), model)
            content_type = where.examples.stream_content_type
            return await _send_stream(writer, reply, chunks, error, content_type)
        return True

    def _default_wire(
        self, request: MockRequest, where: DemoRoute, body: Mapping[str, object]
    ) -> bytes:
        """The whole default response, status line to last byte, cached per model."""
        model = _model(where, body)
        asked = usage_asked(where.endpoint, body)
        key = (request.path, request.stream, self.chunks, model, asked)
        wire = self._wire.get(key)
        if wire is None:
            rendered = self._rendered(where, request.stream, asked)
            if rendered.body is not None:
                wire = _body_wire(200, {}, with_model(rendered.body, model))
            else:
                frame = where.examples.frame
                chunks = [frame(with_model(c, model)) for c in rendered.chunks]
                content_type = where.examples.stream_content_type
                wire = _stream_wire(Reply(), chunks, b"", content_type)
            if len(self._wire) >= _MAX_TEMPLATES:
                self._wire.clear()
            self._wire[key] = wire
        return wire

    def _rendered(self, where: DemoRoute, stream: bool, usage: bool) -> Example:
        key = (where.examples, where.endpoint, stream or where.stream, self.chunks, usage)
        rendered = self._templates.get(key)
        if rendered is None:
            if len(self._templates) >= _MAX_TEMPLATES:
                self._templates.clear()
            rendered = render(where, stream, self.chunks, usage_asked=usage)
            self._templates[key] = rendered
        return rendered


def _model(where: DemoRoute, body: Mapping[str, object]) -> str:
    """The model to echo: the one the path names (a deployment, Gemini's), else the body's."""
    return where.model or str(body.get("model", "mock-model"))


async def _read_request(reader: asyncio.StreamReader) -> MockRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed an idle keep-alive connection
    lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    try:
        parsed = json.loads(body) if body else None
    except (ValueError, RecursionError):
        parsed = None
    path, _, query = target.partition("?")
    return MockRequest(
        method=method,
        path=path,
        headers=headers,
        body=body,
        json=parsed if isinstance(parsed, dict) else None,
        query=query,
    )


def _head(status: int, headers: Mapping[str, str], framing: str, content_type: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Mock')}", framing]
    if "content-type" not in {name.lower() for name in headers}:
        lines.append(f"content-type: {content_type}")
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _body_wire(status: int, headers: Mapping[str, str], body: bytes) -> bytes:
    return _head(status, headers, f"content-length: {len(body)}", "application/json") + body


async def _send_body(
    writer: asyncio.StreamWriter, status: int, headers: Mapping[str, str], body: bytes
) -> None:
    writer.write(_body_wire(status, headers, body))
    await writer.drain()


async def _send_error(
    writer: asyncio.StreamWriter, status: int, headers: Mapping[str, str], where: DemoRoute | None
) -> None:
    """The kind's error answer for `status` (its own headers under the script's)."""
    own, body = error_answer(status, where)
    await _send_body(writer, status, {**own, **headers}, body)


def _frame(chunk: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(chunk), chunk)


def _stream_parts(
    reply: Reply, chunks: Sequence[bytes], error: bytes, content_type: str
) -> tuple[bytes, int, bytes]:
    """The head, how many chunks to send, and what ends the body (nothing when cut)."""
    limit = len(chunks)
    if reply.error_after is not None:
        limit = min(limit, reply.error_after)
    if reply.cut_after is not None:
        limit = min(limit, reply.cut_after)
    head = _head(reply.status, reply.headers, "transfer-encoding: chunked", content_type)
    ending = (_frame(error) if reply.error_after is not None else b"") + b"0\r\n\r\n"
    return head, limit, b"" if reply.cut_after is not None else ending


def _stream_wire(reply: Reply, chunks: Sequence[bytes], error: bytes, content_type: str) -> bytes:
    head, limit, ending = _stream_parts(reply, chunks, error, content_type)
    return head + b"".join(_frame(c) for c in chunks[:limit]) + ending


async def _send_stream(
    writer: asyncio.StreamWriter,
    reply: Reply,
    chunks: Sequence[bytes],
    error: bytes,
    content_type: str,
) -> bool:
    """Stream `chunks` (SSE, or the kind's framing); whether the connection is still usable
    afterwards."""
    if reply.chunk_delay_s == 0 and not reply.chunk_delays and reply.end_delay_s == 0:
        writer.write(_stream_wire(reply, chunks, error, content_type))
        await writer.drain()
        return reply.cut_after is None
    head, limit, ending = _stream_parts(reply, chunks, error, content_type)
    writer.write(head)
    for i, chunk in enumerate(chunks[:limit]):
        delay = reply.chunk_delays[i] if i < len(reply.chunk_delays) else reply.chunk_delay_s
        if delay > 0 and (i > 0 or i < len(reply.chunk_delays)):
            await asyncio.sleep(delay)
        writer.write(_frame(chunk))
        await writer.drain()
    if reply.end_delay_s > 0:
        await asyncio.sleep(reply.end_delay_s)
    writer.write(ending)
    await writer.drain()
    return reply.cut_after is None


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        # Linger 0: close() sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _serve(host: str, port: int, chunks: int) -> None:
    upstream = MockUpstream(chunks=chunks)
    await upstream.start(host, port)
    sys.stderr.write(f"mock upstream listening on {upstream.url}\n")
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, done.set)
    await done.wait()
    await upstream.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m leasegate.demo.upstream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--chunks", type=int, default=DEFAULT_CHUNKS, help="content deltas per stream"
    )
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.chunks))


if __name__ == "__main__":
    main()
