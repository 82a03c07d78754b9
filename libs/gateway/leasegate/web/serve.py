"""Serve an app under uvicorn: one process, or N worker processes on one port. Each deployable's
composition root (`leasegate.proxy.main`, `leasegate.control_plane.main`) serves through here.

`--workers N` (N > 1) uses uvicorn's supervisor: the parent binds the port once and starts N
processes that each import the deployable's app factory (`<package>.main:app`) and accept on
the shared socket; a worker that dies is replaced within 5 s (`_Supervisor`). Every process
serves with `_Server`, whose loop does not tick (the requests renew the `Date` header). `dev`
is one process by design (its stores live in the process).

A clean stop on SIGTERM or SIGINT exits 0: uvicorn would re-raise the signal after draining,
which makes the process look killed (exit 143) to `make` and shells.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Generator, Sequence
from types import FrameType
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.supervisors import Multiprocess, multiprocess

from leasegate.config import Config, ConfigError, Settings, load_config
from leasegate.web.header_deadline import header_deadline_protocol
from leasegate.web.startup import prepare_process, with_access_log

_WORKER_HEALTHCHECK_S = 30

WORKER_HTTP_PROTOCOL = "leasegate.web.worker_http:WorkerHttpProtocol"


class _Server(uvicorn.Server):
    """uvicorn's server without its main loop's tick: uvicorn wakes every 0.1 s to renew the
    `Date` header and to check for a stop, ten wake-ups a second of an idle process. Here the
    requests renew the header as they begin (`leasegate.web.date_header`, from the protocol
    every server here is given), and a stop signal wakes the loop at once."""

    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        should_exit = await self.on_tick(0)  # the default headers, then only the exit check
        while not should_exit:
            await self._wake.wait()
            self._wake.clear()
            should_exit = await self.on_tick(0)

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


class _WorkerProcess(multiprocess.Process):
    """A `--workers N` process that serves with `_Server` (no tick, its stop at once on a
    signal) instead of uvicorn's own (ten wake-ups a second while idle, in every worker). It
    reaches the worker pickled with its class (uvicorn starts workers with `spawn`)."""

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = _Server(config=self.config)
        return self._server


_CHECK_WORKERS_EVERY = 10
"""uvicorn's supervisor wakes every 0.5 s (a stop signal is handled within that) and pings
every worker each time (two wake-ups a second of each idle worker's ping thread). Ours pings
every tenth wake: a worker that died or hangs is replaced within 5 s (the other workers
accept on the shared socket meanwhile)."""


class _Supervisor(Multiprocess):
    _wakes = 0

    def keep_subprocess_alive(self) -> None:
        self._wakes += 1
        if self._wakes % _CHECK_WORKERS_EVERY == 0:
            super().keep_subprocess_alive()


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


def server(app: ASGIApp, config: Config, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for `app` with the gateway's options, to run in a loop of the
    caller's (`serve` runs one in its own)."""
    return _Server(uvicorn.Config(app, **_options(config, host, port)))


def serve(app: ASGIApp, config: Config, host: str, port: int) -> int:
    """Serve `app` in this process until SIGTERM or SIGINT; 0 after a clean stop, 3 when it
    never started (the port taken, say)."""
    server_ = server(app, config, host, port)
    server_.run()
    return 0 if server_.started else 3


def serve_workers(factory: str, workers: int, config: Config, host: str, port: int) -> int:
    """`factory` ("module:function") is imported by each worker and builds its app."""
    uv_config = uvicorn.Config(
        factory,
        factory=True,
        workers=workers,
        # A worker answers the supervisor's liveness ping only once its interpreter has
        # imported the package; uvicorn's 5 s default kills slow starters on a loaded host.
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
        **{**_options(config, host, port), "http": WORKER_HTTP_PROTOCOL},
    )
    socket = uv_config.bind_socket()
    # uvicorn's supervisor builds (and rebuilds, for a worker that died) each worker from
    # this module name: ours serve with `_Server`
    multiprocess.Process = _WorkerProcess  # type: ignore[misc]
    _Supervisor(uv_config, sockets=[socket]).run()
    return 0


Run = Callable[[Config, str, int, int], int]
"""A deployable's `run(config, host, port, workers)`: serve until stopped, the exit status."""


def command(
    prog: str, doc: str | None, default_port: int, run: Run, argv: Sequence[str] | None
) -> int:
    """A deployable's own command (`leasegate-proxy`, `leasegate-control-plane`): `--host`,
    `--port`, `--workers`; the whole configuration validated first (exit 2 with one line
    when it is wrong), then `run`."""
    parser = argparse.ArgumentParser(prog=prog, description=doc)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--workers", type=int, default=1, help="processes serving one port")
    args = parser.parse_args(argv)
    try:
        config = load_config()
        prepare_process(config)
        return run(config, args.host, args.port, args.workers)
    except ConfigError as exc:
        sys.stderr.write(f"{prog}: configuration error: {exc}\n")
        return 2


def require_redis(settings: Settings) -> None:
    """Separate server processes share their stores through Redis; ConfigError without it."""
    if settings.redis_url is None:
        raise ConfigError(
            "LEASEGATE_REDIS_URL: required for separate control-plane and proxy processes "
            "(use `leasegate dev` for the single-process embedded mode)"
        )


def serve_deployable(
    build: Callable[[Config], ASGIApp],
    factory: str,
    config: Config,
    host: str,
    port: int,
    workers: int,
) -> int:
    """Serve the app `build` makes: in this process, or in `workers` processes that each
    import `factory` (the deployable's `main:app`, which calls `worker_app(build)`)."""
    if workers > 1:
        return serve_workers(factory, workers, config, host, port)
    return serve(with_access_log(build(config), config), config, host, port)


def worker_app(build: Callable[[Config], ASGIApp]) -> ASGIApp:
    """One `--workers N` process's app: it reads the environment the parent validated."""
    config = load_config()
    prepare_process(config)
    return with_access_log(build(config), config)
