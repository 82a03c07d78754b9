"""Run a server command under uvicorn: one process, or N worker processes on one port.

`--workers N` (N > 1) uses uvicorn's own supervisor: the parent binds the port once and
starts N processes that each import an app factory (leasegate.cli.factories) and accept on
the shared socket; a worker that dies is replaced. `dev` is one process by design (its
stores live in the process).

A clean stop on SIGTERM or SIGINT exits 0: uvicorn would re-raise the signal after draining,
which makes the process look killed (exit 143) to `make` and shells.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Generator
from types import FrameType
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.supervisors import Multiprocess

from leasegate.config import Config
from leasegate.web.header_deadline import header_deadline_protocol

_WORKER_HEALTHCHECK_S = 30

WORKER_HTTP_PROTOCOL = "leasegate.cli.factories:WorkerHttpProtocol"
FACTORIES = {
    "control-plane": "leasegate.cli.factories:control_plane_app",
    "proxy": "leasegate.cli.factories:proxy_app",
}


_TICK_S = 1.0
"""uvicorn's main loop wakes every 0.1 s (the `Date` header, the exit check): ten wake-ups a
second of an idle process. This one wakes once a second (the `Date` header's resolution) and
at once when a stop signal arrives."""


class _Server(uvicorn.Server):
    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0  # a multiple of 10: `on_tick` renews the `Date` header every time
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_TICK_S):
                    await self._wake.wait()
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _options(config: Config, host: str, port: int) -> dict[str, Any]:
    return {
        "host": host,
        "port": port,
        "log_config": None,
        "access_log": False,  # leasegate.web.access_log writes the access lines
        "timeout_graceful_shutdown": int(config.settings.shutdown_drain_s),
        "lifespan": "on",
        # no WebSocket route exists: "auto" would load a websockets implementation (~10 MB)
        "ws": "none",
        # named, not "auto": a missing uvloop fails at start instead of silently costing CPU
        "loop": "uvloop",
        # httptools, with the header read deadline and header size cap
        # (leasegate.web.header_deadline)
        "http": header_deadline_protocol(config.settings.header_read_timeout_s),
    }


def serve(app: ASGIApp, config: Config, host: str, port: int) -> int:
    server = _Server(uvicorn.Config(app, **_options(config, host, port)))
    server.run()
    return 0 if server.started else 3


def serve_workers(command: str, workers: int, config: Config, host: str, port: int) -> int:
    uv_config = uvicorn.Config(
        FACTORIES[command],
        factory=True,
        workers=workers,
        # A worker answers the supervisor's liveness ping only once its interpreter has
        # imported the package; uvicorn's 5 s default kills slow starters on a loaded host.
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
        **{**_options(config, host, port), "http": WORKER_HTTP_PROTOCOL},
    )
    socket = uv_config.bind_socket()
    Multiprocess(uv_config, sockets=[socket]).run()
    return 0


def serve_with_demo(app: ASGIApp, config: Config, host: str, port: int, demo_port: int) -> int:
    """`serve`, with the demo upstream listening on `demo_port` in the same event loop. The
    demo upstream is imported here, so only `leasegate demo` loads it."""
    from leasegate.demo.upstream import MockUpstream

    server = _Server(uvicorn.Config(app, **_options(config, host, port)))

    async def both() -> None:
        upstream = MockUpstream()
        await upstream.start("127.0.0.1", demo_port)
        try:
            await server.serve()
        finally:
            await upstream.stop()

    asyncio.run(both())
    return 0 if server.started else 3
