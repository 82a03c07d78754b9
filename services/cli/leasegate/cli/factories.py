"""App factories for `--workers N`: uvicorn imports one of these in each worker process.

Each worker reads the same environment as the parent (which validated it already) and
builds its own app, stores and connections; they share only the listening socket.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from leasegate.cli.startup import prepare_process, with_access_log
from leasegate.config import load_config
from leasegate.web.header_deadline import header_deadline_protocol


def control_plane_app() -> ASGIApp:
    from leasegate.control_plane.app import create_control_plane_app  # only in its workers

    config = load_config()
    prepare_process(config)
    return with_access_log(create_control_plane_app(config), config)


def proxy_app() -> ASGIApp:
    from leasegate.proxy.app import create_proxy_app  # a proxy worker never loads the rest

    config = load_config()
    prepare_process(config)
    return with_access_log(create_proxy_app(config), config)


# uvicorn imports the `http` protocol by name in each worker (a class made at run time cannot
# be handed to a spawned process), so the worker's deadline is read from the same environment.
WorkerHttpProtocol = header_deadline_protocol(load_config().settings.header_read_timeout_s)
