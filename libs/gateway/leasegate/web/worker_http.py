"""The HTTP protocol of a `--workers N` process (`leasegate.web.serve.serve_workers`).

uvicorn imports the `http` protocol by name in each worker (a class made at run time cannot be
handed to a spawned process), so the worker's header read deadline is read from the same
environment the parent validated."""

from __future__ import annotations

from leasegate.config import load_config
from leasegate.web.header_deadline import header_deadline_protocol

WorkerHttpProtocol = header_deadline_protocol(load_config().settings.header_read_timeout_s)
