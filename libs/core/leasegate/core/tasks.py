"""Ending a background task for good.

`task.cancel()` followed by `await task` is not enough on Python 3.11: `asyncio.wait_for`
returns its inner result instead of raising when the cancel lands as that inner call completes
(fixed in 3.12, where `wait_for` is built on `asyncio.timeout`). redis-py sends every command
through `wait_for` when a socket timeout is set, so a loop of Redis calls swallows about one
cancel in two; such a loop runs on, and whoever awaits it (a process's shutdown) waits forever.
A stop therefore cancels again for as long as the task still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

RECANCEL_EVERY_S = 0.05


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` until it ends, and wait for it; an error it ended with is raised (a
    cancellation is its normal end). None: nothing to stop."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait((task,), timeout=RECANCEL_EVERY_S)
    with contextlib.suppress(asyncio.CancelledError):
        await task
