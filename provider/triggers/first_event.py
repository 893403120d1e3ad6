"""When a deltaguard trigger may fire its first event: not before its deferring task's exit reached the scheduler.

The rule and its measurement are :func:`deltaguard.leases.waiting.first_event_after_s`'s. A trigger built by a
task carries the value the task's worker read (``[workers] min_heartbeat_interval`` is the worker's
supervisor's); one built without it reads the triggerer's own configuration when it starts.
"""

from __future__ import annotations

import asyncio
import time


async def not_before(after_s: float | None) -> float:
    """The monotonic time before which a trigger starting now must not fire.

    :param after_s: seconds from now (``None``: :func:`deltaguard.config.first_event_after_s`, read now).
    """
    started = time.monotonic()
    if after_s is None:
        from deltaguard import config

        after_s = await asyncio.to_thread(config.first_event_after_s)
    return started + max(0.0, after_s)


async def hold_until(moment: float) -> None:
    """Sleep until the monotonic time ``moment`` (at once when it has passed)."""
    left = moment - time.monotonic()
    if left > 0:
        await asyncio.sleep(left)
