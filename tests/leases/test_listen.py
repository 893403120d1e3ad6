"""``FreedListener``'s bookkeeping without a server: which waiters a notification wakes, and a release that
arrived between a waiter's check and its registration."""

from __future__ import annotations

import asyncio
import time

from deltaguard.leases.sql.listen import FreedListener


def test_a_notification_wakes_only_the_waiters_it_names() -> None:
    async def scenario() -> tuple[bool, bool, int]:
        listener = FreedListener("")  # never started: notifications are delivered by hand
        a, b = asyncio.Event(), asyncio.Event()
        listener.watch(a, {"lease-1"}, since=time.monotonic())
        listener.watch(b, {"lease-2"}, since=time.monotonic())
        listener._deliver("lease-1 /t/sales")
        listener.unwatch(b)
        return a.is_set(), b.is_set(), listener.waiters

    assert asyncio.run(scenario()) == (True, False, 1)


def test_a_release_between_check_and_registration_is_not_lost() -> None:
    async def scenario() -> tuple[bool, bool]:
        listener = FreedListener("")
        check_began = time.monotonic()
        listener._deliver("lease-1 /t/sales")  # freed while the waiter's check ran
        late, stale = asyncio.Event(), asyncio.Event()
        listener.watch(late, {"lease-1"}, since=check_began)
        listener.watch(stale, {"lease-1"}, since=time.monotonic() + 1)  # a check begun after the release
        return late.is_set(), stale.is_set()

    assert asyncio.run(scenario()) == (True, False)
