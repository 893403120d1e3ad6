"""A lease trigger the triggerer cancels ends, even when a release wakes it in the same turn of the event loop.

On Python 3.11, ``asyncio.wait_for`` returns the awaited result instead of raising when its task is cancelled
just as that result arrives (CPython gh-86296). A trigger parked in ``wait_for(woken.wait(), ...)`` then lost
the cancellation, went on checking, and later took a lease for a task the triggerer had given up on: in a
crowd of 30 waiting triggers, one cancelled that way kept polling until the crowd's leases expired, 10 minutes
later, and granted itself then.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.hooks import lease as shared_store
from deltaguard.triggers.lease import LeaseAvailableTrigger
from deltaguard.triggers.wake import wait_woken
from tests.airflow.hang import HANG_S
from tests.airflow.helpers import store_handles_closed, store_held_by

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def _request(owner: str, kind: OperationKind) -> LeaseRequest:
    claim = TableClaim("/t/cancel", Operation(kind, label=owner), PROFILE, TableConfig())
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=600, wait_ttl_s=120)


def test_a_wait_cancelled_as_its_event_is_set_raises() -> None:
    async def scenario() -> None:
        event = asyncio.Event()
        task = asyncio.create_task(wait_woken(event, 600.0))
        await asyncio.sleep(0)  # parked in the wait
        event.set()
        task.cancel()  # in the same turn: the wait must not hide the cancellation behind the event
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_wait_woken_says_whether_the_event_came() -> None:
    async def scenario() -> tuple[bool, bool]:
        set_before = asyncio.Event()
        set_before.set()
        return await wait_woken(set_before, 600.0), await wait_woken(asyncio.Event(), 0.01)

    assert asyncio.run(scenario()) == (True, False)


def test_a_trigger_cancelled_as_a_release_wakes_it_takes_no_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, manager, holder = store_held_by(
        tmp_path, monkeypatch, _request("alter", OperationKind.SET_TBLPROPERTIES)
    )
    waiting = manager.acquire(_request("w", OperationKind.INSERT))
    assert isinstance(waiting, Waiting)

    async def scenario() -> asyncio.Task[object]:
        # first check after one poll interval; then, woken by nothing, it waits at least that long again
        trigger = LeaseAvailableTrigger(url, waiting.request_id, poll_interval=5.0, first_event_after_s=0.0)
        task: asyncio.Task[object] = asyncio.create_task(anext(trigger.run()))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANG_S
        # parked in its wait for a wake-up: its event is registered with the store's watcher
        while loop.time() < deadline and not task.done():
            entry = next(iter(shared_store._SHARED.values()), None)
            if entry is not None and entry.listener is not None and entry.listener.waiters == 1:
                break
            await asyncio.sleep(0.01)
        assert not task.done(), task
        assert entry is not None and entry.listener is not None and entry.listener.waiters == 1
        (woken,) = list(entry.listener._keys)
        # the triggerer gives up on the trigger in the very turn a release wakes it
        woken.set()
        task.cancel()
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        await asyncio.wait({task}, timeout=HANG_S)
        await store_handles_closed()
        return task

    task = asyncio.run(scenario())
    assert task.done(), "the cancelled trigger still runs"  # and would take a lease once granted
    assert task.cancelled(), f"the cancelled trigger went on and fired {task.result()}"
    assert manager.leases("/t/cancel") == [], "a cancelled trigger took a lease"
    manager.store.close()
