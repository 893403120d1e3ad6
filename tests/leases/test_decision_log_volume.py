"""The decision log records changes of a wait, not every poll; the UI still shows the current answer."""

from __future__ import annotations

import pytest

from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.plugins.views import latest_waits
from tests.leases.conftest import op, request

TABLE = "s3://b/t"


def _waits(manager: LeaseManager, request_id: str) -> list[dict]:
    return [
        d.detail
        for d in manager.decisions(uri=TABLE, limit=1000)
        if d.kind == "wait" and d.request_id == request_id
    ]


@pytest.mark.parametrize("poll", ["acquire", "check"])
def test_polls_of_an_unchanged_wait_write_one_entry(store_url: str, clock, poll: str) -> None:
    manager = LeaseManager(store_url, clock=clock)
    try:
        holder = manager.acquire(request("holder", (TABLE, op("DELETE")), ttl_s=3600))
        assert isinstance(holder, Granted)
        waiter = request("waiter", (TABLE, op("OPTIMIZE")), wait_ttl_s=30)
        for _ in range(25):  # 50 s of polls, past the wait ttl: the queue entry is renewed, not re-logged
            answer = (
                manager.acquire(waiter) if poll == "acquire" or _ == 0 else manager.check(waiter.request_id)
            )
            assert isinstance(answer, Waiting)
            clock.advance(2)
        assert len(_waits(manager, waiter.request_id)) == 1
    finally:
        manager.store.close()


def test_blockers_leaving_log_nothing_a_new_blocker_logs_again(store_url: str, clock) -> None:
    manager = LeaseManager(store_url, clock=clock)
    try:
        first = request("first", (TABLE, op("OPTIMIZE")), ttl_s=3600)
        assert isinstance(manager.acquire(first), Granted)
        ahead = request("ahead", (TABLE, op("OPTIMIZE")), ttl_s=3600)
        waiter = request("waiter", (TABLE, op("OPTIMIZE")))
        assert isinstance(manager.acquire(ahead), Waiting)
        clock.advance(1)
        blocked = manager.acquire(waiter)
        assert {b.id for b in blocked.blockers} == {first.request_id, ahead.request_id}
        manager.release(first.request_id, first.owner)
        clock.advance(1)
        assert isinstance(manager.acquire(ahead), Granted)  # the request ahead became the holder
        for _ in range(5):
            clock.advance(1)
            now_blocked = manager.acquire(waiter)
            assert [b.id for b in now_blocked.blockers] == [ahead.request_id]
        assert len(_waits(manager, waiter.request_id)) == 1  # blockers only left: nothing new to log
        # The UI shows the current answer (from the request row), not the stale logged one.
        row = manager.store.read_request(waiter.request_id)
        decisions = manager.store.decisions(uri=TABLE, limit=1000)
        assert [b["id"] for b in latest_waits(decisions)[waiter.request_id]["blockers"]] == [
            first.request_id,
            ahead.request_id,
        ]
        current = latest_waits(decisions, {waiter.request_id: row})[waiter.request_id]
        assert [b["id"] for b in current["blockers"]] == [ahead.request_id]
        urgent = request("urgent", (TABLE, op("OPTIMIZE")), priority=100)
        assert isinstance(manager.acquire(urgent), Waiting)  # overtakes the waiter
        clock.advance(1)
        overtaken = manager.acquire(waiter)
        assert urgent.request_id in {b.id for b in overtaken.blockers}
        logged = _waits(manager, waiter.request_id)
        assert len(logged) == 2
        assert {b["id"] for b in logged[0]["blockers"]} == {ahead.request_id, urgent.request_id}
    finally:
        manager.store.close()
