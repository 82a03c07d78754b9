"""JSON lines on stderr. Records carry structured fields in `extra`; no secret is ever passed.

Every request writes one line (the access log), so the line is cheap: orjson encodes it (the
standard library's encoder only for what orjson refuses, e.g. a lone surrogate), and the
record skips what no line carries (the caller's file and line, thread and process names).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import orjson

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        try:
            return orjson.dumps(line, default=str).decode()
        except (TypeError, orjson.JSONEncodeError):
            return json.dumps(line, default=str)


def configure_logging(level: str) -> None:
    # what a record would otherwise look up per line for fields no line carries
    logging._srcfile = None  # the switch the logging docs name for skipping findCaller
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request URL at INFO; the gateway's own rows say more, and less.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # Alembic, imported on first use, announces each of its plugins at INFO
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
