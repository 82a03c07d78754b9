"""`stop_task` ends a background task even when the task swallows cancels (as a loop of
redis-py calls does on Python 3.11, see `leasegate.core.tasks`), and reports how it ended."""

from __future__ import annotations

import asyncio

import pytest

from leasegate.core.tasks import stop_task


async def _swallowing(cancels_swallowed: int, ticks: list[int]) -> None:
    """A loop whose first cancels are lost, as when a library returns instead of raising."""
    while True:
        try:
            await asyncio.sleep(0.001)
            ticks.append(1)
        except asyncio.CancelledError:
            if cancels_swallowed == 0:
                raise
            cancels_swallowed -= 1


async def test_a_loop_that_swallows_cancels_is_stopped_all_the_same() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(_swallowing(3, ticks))
    await asyncio.sleep(0.01)
    async with asyncio.timeout(2):
        await stop_task(task)
    assert task.cancelled()
    stopped_at = len(ticks)
    await asyncio.sleep(0.02)
    assert len(ticks) == stopped_at  # it runs no more


async def test_an_error_the_task_ended_with_is_raised() -> None:
    async def failing() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await stop_task(task)
