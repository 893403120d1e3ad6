"""Awaits in tests that cannot hang silently: past a bound far beyond any honest run, the test fails with
where every asyncio task and every thread of the process stood.

The bound is a hang diagnosis, not a speed target: it is minutes where the awaited step takes seconds on a
loaded machine.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import io
import sys
import threading
import traceback
from collections.abc import Awaitable
from types import FrameType
from typing import TypeVar

import pytest

T = TypeVar("T")

#: far beyond the slowest honest run of any awaited step of these tests (seconds, even beside the heavy tests)
HANG_S = 300.0
#: frames shown of each thread's stack (the test runner's own make the main thread's hundreds deep)
FRAMES = 25


def stacks() -> str:
    """Every asyncio task's stack (of the running loop) and every thread's stack, as text."""
    out = io.StringIO()
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop
        tasks = set()
    current = asyncio.current_task() if tasks else None
    for task in sorted(tasks, key=lambda t: t.get_name()):
        if task is not current:  # the one asking, whose stack is the thread's below
            out.write(f"--- task {task.get_name()}: {task!r}\n")
            frames = traceback.StackSummary.extract((f, f.f_lineno) for f in awaiting(task.get_coro()))
            out.write("".join(frames.format()))
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.write(f"--- thread {names.get(ident, '?')} ({ident}), innermost {FRAMES} frames\n")
        out.write("".join(traceback.format_stack(frame)[-FRAMES:]))
    return out.getvalue()


def awaiting(coro: object) -> list[FrameType]:
    """The frames of a suspended coroutine and of everything it awaits, outermost first.

    Unlike :meth:`asyncio.Task.get_stack`, this follows an ``async for`` into the async generator it iterates
    (the trigger's ``run()``): the awaitable of one step of it refers to the generator only internally.
    """
    frames: list[FrameType] = []
    seen: set[int] = set()
    while coro is not None and id(coro) not in seen:
        seen.add(id(coro))
        frame = (
            getattr(coro, "cr_frame", None)
            or getattr(coro, "ag_frame", None)
            or getattr(coro, "gi_frame", None)
        )
        if frame is not None:
            frames.append(frame)
        following = next(
            (
                getattr(coro, name)
                for name in ("cr_await", "ag_await", "gi_yieldfrom")
                if getattr(coro, name, None) is not None
            ),
            None,
        )
        if following is None and type(coro).__name__ == "async_generator_asend":
            following = next((g for g in gc.get_referents(coro) if inspect.isasyncgen(g)), None)
        coro = following
    return frames


async def within(awaitable: Awaitable[T], what: str, timeout_s: float = HANG_S) -> T:
    """Await ``awaitable``; after ``timeout_s`` seconds, fail the test with :func:`stacks` (taken before
    anything is cancelled, so they show where it stuck).

    :param what: the step, for the failure message.
    """
    future = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({future}, timeout=timeout_s)
    if not done:
        report = stacks()
        future.cancel()
        pytest.fail(f"hung: {what} did not finish within {timeout_s:g} s\n{report}", pytrace=False)
    return future.result()


async def wind_down() -> None:
    """What :func:`asyncio.run` does after its coroutine, bounded: cancel the tasks left and wait for them,
    then for the default executor's threads (Python 3.11 waits for them without a limit). Call last."""
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not current]
    for task in left:
        task.cancel()
    await within(asyncio.gather(*left, return_exceptions=True), f"the {len(left)} tasks left, once cancelled")
    await within(asyncio.get_running_loop().shutdown_default_executor(), "the default executor's threads")
