"""Waiting for a trigger's wake-up without losing the triggerer's cancellation.

On Python 3.11, ``asyncio.wait_for`` returns the awaited result instead of raising when the waiting task is
cancelled in the turn of the event loop in which that result arrives (CPython gh-86296; 3.12 rebuilt
``wait_for`` on :func:`asyncio.timeout`). A trigger the triggerer cancels just as a release sets its wake-up
event then carried on: it checked again, waited again, and could take a lease for a task the triggerer had
given up on. :func:`asyncio.timeout` wraps no inner task, so a cancellation always reaches the waiter.
"""

from __future__ import annotations

import asyncio
import contextlib


async def wait_woken(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds have passed; return whether it is set.

    A cancellation of the waiting task always propagates, whether or not the event came in the same turn.

    :param event: the wake-up event.
    :param timeout: seconds to wait at most.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()
